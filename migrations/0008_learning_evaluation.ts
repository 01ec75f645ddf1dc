import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS learning_evaluation (
  id CHAR(36) NOT NULL,
  job_id CHAR(36) NOT NULL,
  user_id VARCHAR(64) NOT NULL,
  concept VARCHAR(255) NOT NULL,
  score INT NOT NULL,
  feedback TEXT NOT NULL,
  gaps JSON NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_learning_evaluation_job (job_id),
  KEY idx_learning_evaluation_user (user_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
