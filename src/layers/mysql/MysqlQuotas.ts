import { SqlClient, SqlSchema, type Statement } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import { QuotaLimitsConfig } from "../../config/QuotaLimitsConfig.js"
import { admission, Quotas } from "../../services/Quotas.js"
import { sqlClock } from "./sqlClock.js"
import { persistence } from "./sqlErrors.js"

/** SUM over no rows is NULL, hence the COALESCE; mysql2 hands a DECIMAL sum or a BIGINT count over as a number or a string. */
const Count = Schema.Union(Schema.Number, Schema.NumberFromString)
const UserCounts = Schema.Struct({ active: Count, today: Count, activeCredentialId: Schema.NullOr(Schema.String) })
/** The user, and the provider whose active key the read also finds (NULL: none asked, none found). */
const GateRequest = Schema.Struct({ userId: Schema.String, provider: Schema.NullOr(Schema.String) })

/** Users whose gate row this process has seen; past this many it starts over (a miss only costs the insert path). */
const knownGatesLimit = 100_000

/**
 * Locks the user's gate row until commit, then counts. Two creates of one user therefore count
 * one after the other; other users never wait. The day is the database's UTC day.
 *
 * A user this process has admitted before takes one statement: a locking read of the gate row
 * whose correlated counts run once the lock is held. A user new to the process takes the
 * insert-or-touch first (no gap lock: a locking read of a missing row would take one, and two
 * first creates of one user would deadlock on it), then the counts. Either read also looks up
 * the user's active key when the create asks (the same lookup as `CredentialRepository.findActive`).
 */
export const MysqlQuotas = Layer.effect(
  Quotas,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { now } = sqlClock(sql)
    const limits = yield* QuotaLimitsConfig
    const knownGates = new Set<string>()
    const touchGate = SqlSchema.void({
      Request: Schema.String,
      execute: (userId) =>
        sql`INSERT INTO ai_user_job_gate (user_id, updated_at) VALUES (${userId}, ${now})
            ON DUPLICATE KEY UPDATE updated_at = ${now}`
    })
    // `provider = NULL` matches no row: a create that asks for no key reads none.
    const activeCredential = (userId: Statement.Fragment, provider: string | null) =>
      sql`(SELECT c.id FROM user_model_credential c
            WHERE c.user_id = ${userId} AND c.provider = ${provider} AND c.revoked_at IS NULL
            ORDER BY c.created_at DESC, c.id DESC LIMIT 1)`
    const countJobs = SqlSchema.findOne({
      Request: GateRequest,
      Result: UserCounts,
      execute: ({ provider, userId }) =>
        sql`SELECT
              COALESCE(SUM(lifecycle_status IN ('queued', 'running')), 0) AS active,
              COALESCE(SUM(created_at >= UTC_DATE()), 0) AS today,
              ${activeCredential(sql`${userId}`, provider)} AS active_credential_id
            FROM ai_job WHERE user_id = ${userId}`
    })
    // The counts reference the locked row, so they run per row, after its lock is granted: the
    // transaction's first consistent read, they see every create committed before the lock.
    const lockAndCount = SqlSchema.findOne({
      Request: GateRequest,
      Result: UserCounts,
      execute: ({ provider, userId }) =>
        sql`SELECT
              (SELECT COUNT(*) FROM ai_job j WHERE j.user_id = g.user_id AND j.lifecycle_status IN ('queued', 'running')) AS active,
              (SELECT COUNT(*) FROM ai_job j WHERE j.user_id = g.user_id AND j.created_at >= UTC_DATE()) AS today,
              ${activeCredential(sql`g.user_id`, provider)} AS active_credential_id
            FROM ai_user_job_gate g WHERE g.user_id = ${userId} FOR UPDATE`
    })
    const touchAndCount = (request: typeof GateRequest.Type) =>
      touchGate(request.userId).pipe(
        Effect.zipRight(countJobs(request)),
        Effect.map(Option.getOrElse(() => ({ active: 0, today: 0, activeCredentialId: null })))
      )
    // Only an admitted create keeps its gate row: a refused one rolls back, and with it a row it
    // inserted. Remembered then, the user's next concurrent creates would each take a gap lock
    // on the missing row before inserting it, and deadlock one another.
    const remember = (userId: string) =>
      Effect.sync(() => {
        if (knownGates.size >= knownGatesLimit) knownGates.clear()
        knownGates.add(userId)
      })
    const counts = (request: typeof GateRequest.Type) =>
      Effect.suspend(() =>
        knownGates.has(request.userId)
          // A gate row gone since (its create rolled back) falls back to the insert path.
          ? Effect.flatMap(
            lockAndCount(request),
            Option.match({ onNone: () => touchAndCount(request), onSome: Effect.succeed })
          )
          : touchAndCount(request)
      )
    const admit: Quotas["Type"]["admit"] = (userId, options) =>
      counts({ userId, provider: options?.activeCredentialOf ?? null }).pipe(
        persistence("quotas.admit"),
        Effect.flatMap((found) =>
          Effect.as(admission(userId, limits, found, options?.jobs), {
            activeCredentialId: Option.fromNullable(found.activeCredentialId)
          })
        ),
        Effect.tap(() => remember(userId))
      )
    return Quotas.of({ admit })
  })
)
