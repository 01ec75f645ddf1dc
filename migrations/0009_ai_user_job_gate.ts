import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// One row per user that has ever created a job. The create transaction locks it, so concurrent
// creates of one user are counted against the limits one after another.
export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS ai_user_job_gate (
  user_id VARCHAR(64) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  PRIMARY KEY (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
