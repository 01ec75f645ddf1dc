import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS ai_job_artifact (
  id CHAR(36) NOT NULL,
  job_id CHAR(36) NOT NULL,
  artifact_type VARCHAR(64) NOT NULL,
  artifact_id VARCHAR(191) NOT NULL,
  ordinal INT NOT NULL,
  created_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_ai_job_artifact (job_id, artifact_type, artifact_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
