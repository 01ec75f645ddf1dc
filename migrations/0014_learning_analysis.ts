import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Identifier columns are VARBINARY from the start (exact comparison, as migration 0011 made the
// older tables); created_at takes the database clock's time, as migration 0013 made theirs.
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS learning_analysis (
  id VARBINARY(36) NOT NULL,
  job_id VARBINARY(36) NOT NULL,
  user_id VARBINARY(256) NOT NULL,
  evaluation_ids JSON NOT NULL,
  summary TEXT NOT NULL,
  strengths JSON NOT NULL,
  gaps JSON NOT NULL,
  next_steps JSON NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uq_learning_analysis_job (job_id),
  KEY idx_learning_analysis_user (user_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
