import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// The business table of the engine's own test job type, so its projection is as real as any.
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS synthetic_echo_result (
  id CHAR(36) NOT NULL,
  job_id CHAR(36) NOT NULL,
  echo TEXT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_synthetic_echo_result_job (job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
