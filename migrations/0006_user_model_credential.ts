import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.unsafe(`
CREATE TABLE IF NOT EXISTS user_model_credential (
  id CHAR(36) NOT NULL,
  user_id VARCHAR(64) NOT NULL,
  provider VARCHAR(32) NOT NULL,
  encrypted_key TEXT NOT NULL,
  iv VARCHAR(32) NOT NULL,
  auth_tag VARCHAR(32) NOT NULL,
  key_version INT NOT NULL,
  key_fingerprint CHAR(64) NOT NULL,
  revoked_at DATETIME(3) NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  KEY idx_user_model_credential_user (user_id, provider, revoked_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`))
