import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Business rows get `created_at` from the database clock. Projectors never wrote the column, and
 * `INSERT IGNORE` had turned the strict-mode error into a zero date; rows stored that way take
 * their job's finish time, the moment their projection committed. Safe to run again.
 */
const businessTables = ["flashcard", "learning_evaluation", "synthetic_echo_result"] as const

export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.forEach(
    businessTables,
    (table) =>
      sql.unsafe(`ALTER TABLE ${table} MODIFY COLUMN created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)`)
        .pipe(
          Effect.zipRight(
            sql.unsafe(`UPDATE ${table} b JOIN ai_job j ON j.id = b.job_id
                      SET b.created_at = COALESCE(j.finished_at, j.updated_at)
                      WHERE b.created_at < '1000-01-01'`)
          )
        ),
    { discard: true }
  ))
