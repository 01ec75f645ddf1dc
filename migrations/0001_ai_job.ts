import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Each migration is one CREATE TABLE IF NOT EXISTS: MySQL DDL auto-commits, so a migration that
// half ran must be safe to run again (the Migrator may already have recorded it).
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS ai_job (
  id CHAR(36) NOT NULL,
  user_id VARCHAR(64) NOT NULL,
  job_type VARCHAR(64) NOT NULL,
  target_type VARCHAR(64) NOT NULL,
  target_id VARCHAR(191) NOT NULL,
  idempotency_key VARCHAR(191) NULL,
  status VARCHAR(32) NOT NULL,
  lifecycle_status VARCHAR(16) NOT NULL,
  queue_name VARCHAR(32) NOT NULL,
  priority INT NOT NULL,
  progress INT NOT NULL DEFAULT 0,
  input JSON NOT NULL,
  credential_mode VARCHAR(32) NOT NULL,
  credential_id CHAR(36) NULL,
  prompt_version VARCHAR(32) NOT NULL,
  input_schema_version VARCHAR(32) NOT NULL,
  output_schema_version VARCHAR(32) NOT NULL,
  attempt_count INT NOT NULL DEFAULT 0,
  max_attempts INT NOT NULL,
  locked_by VARCHAR(128) NULL,
  locked_at DATETIME(3) NULL,
  lock_until DATETIME(3) NULL,
  cancel_requested_at DATETIME(3) NULL,
  started_at DATETIME(3) NULL,
  finished_at DATETIME(3) NULL,
  error_code VARCHAR(64) NULL,
  public_error_message VARCHAR(512) NULL,
  internal_error_message TEXT NULL,
  output_hash CHAR(64) NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_ai_job_idempotency (user_id, job_type, idempotency_key),
  KEY idx_ai_job_user_created (user_id, created_at, id),
  KEY idx_ai_job_user_status (user_id, lifecycle_status),
  KEY idx_ai_job_status_lock (lifecycle_status, lock_until),
  KEY idx_ai_job_created (created_at, id),
  KEY idx_ai_job_type_created (job_type, created_at),
  KEY idx_ai_job_status_created (lifecycle_status, created_at),
  KEY idx_ai_job_queue_created (queue_name, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
