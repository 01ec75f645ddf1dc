import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS flashcard (
  id CHAR(36) NOT NULL,
  job_id CHAR(36) NOT NULL,
  user_id VARCHAR(64) NOT NULL,
  deck_id VARCHAR(64) NULL,
  ordinal INT NOT NULL,
  front TEXT NOT NULL,
  back TEXT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_flashcard_job_ordinal (job_id, ordinal),
  KEY idx_flashcard_user_deck (user_id, deck_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
