import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `ai_job_batch`: the jobs a batch create made under one `Idempotency-Key`, in the order the
 * request listed them, so the same key and body answer with the same jobs again. Only a batch
 * sent with a key has a row. Identifiers compare byte for byte, as on `ai_job`.
 */
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS ai_job_batch (
  id VARBINARY(36) NOT NULL,
  user_id VARBINARY(256) NOT NULL,
  job_type VARCHAR(64) NOT NULL,
  idempotency_key VARBINARY(764) NOT NULL,
  request_hash CHAR(64) NOT NULL,
  job_ids JSON NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_ai_job_batch_idempotency (user_id, job_type, idempotency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
