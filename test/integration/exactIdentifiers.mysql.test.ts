import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlMigrator } from "@effect/sql-mysql2"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { checkLiveDatabase } from "../../migrations-check/check.js"
import { isDrift } from "../../migrations-check/compare.js"
import { normalizeColumnType } from "../../migrations-check/normalizeType.js"
import { describeDifference, renderReport } from "../../migrations-check/report.js"
import exactIdentifiers from "../../migrations/0011_exact_identifiers.js"
import { migrations, migrationsTable } from "../../migrations/index.js"
import { QuotaLimitsConfig } from "../../src/config/QuotaLimitsConfig.js"
import { runMigrations } from "../../src/layers/mysql/migrate.js"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { CredentialRepository } from "../../src/services/CredentialRepository.js"
import { jobCreation, mysqlCreationRepositories } from "../support/foundationStack.js"
import { acquireScratchDatabase } from "../support/scratchDatabase.js"

/**
 * Exact identifiers at the database level, on MariaDB: what migration 0011 changes for rows that
 * existed before it, and what `migrations-check --live` says about a database still without it.
 */

const clientFor = (url: string) => mysqlClientLayer(Redacted.make(url), { maxConnections: 4 })

/** The migrations before 0011: a database as it was deployed before identifiers became exact. */
const migrationsBefore0011 = MysqlMigrator.run({
  loader: Effect.map(migrations, (all) => all.filter(([id]) => id < 11)),
  table: migrationsTable
})

const legacyJobId = "00000000-0000-7000-8000-000000000001"
const legacyCredentialId = "00000000-0000-7000-8000-000000000002"
const paddedUsersJobId = "00000000-0000-7000-8000-000000000003"

/** A job row as written before 0011 (no request hash), straight into the table. */
const insertJob = (id: string, userId: string, idempotencyKey: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe(
      `INSERT INTO ai_job (id, user_id, job_type, target_type, target_id, idempotency_key, status, lifecycle_status,
         queue_name, priority, progress, input, credential_mode, prompt_version, input_schema_version,
         output_schema_version, attempt_count, max_attempts, created_at, updated_at)
       VALUES (?, ?, 'synthetic_echo', 'test', 't', ?, 'pending', 'queued', 'ai-interactive', 50, 0,
         '{"message":"legacy"}', 'platform_key', 'v1', 'v1', 'v1', 0, 3, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
      [id, userId, idempotencyKey]
    ))

/** victim1's job and stored key, as they were before 0011. */
const insertLegacyRows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* insertJob(legacyJobId, "victim1", "legacy-key")
  yield* sql.unsafe(
    `INSERT INTO user_model_credential (id, user_id, provider, encrypted_key, iv, auth_tag, key_version, key_fingerprint,
       created_at, updated_at)
     VALUES (?, 'victim1', 'deepseek', 'ZW5j', 'aXY=', 'dGFn', 1, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
    [legacyCredentialId, "d".repeat(64)]
  )
})

const Count = Schema.Struct({ n: Schema.Union(Schema.Number, Schema.NumberFromString) })
const countWhere = (query: string, params: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* Schema.decodeUnknown(Schema.Array(Count))(yield* sql.unsafe(query, params))
    return Number(row?.n ?? 0)
  })

const generousLimits = { maxActiveJobsPerUser: 10_000, dailyJobQuota: 10_000 }

/** The repositories and job creation on the database of `url`. */
const engineOn = (url: string) =>
  jobCreation(
    mysqlCreationRepositories.pipe(
      Layer.provideMerge(Layer.merge(clientFor(url), QuotaLimitsConfig.make(generousLimits)))
    )
  ).pipe(Layer.orDie)

describe("normalizing varbinary", () => {
  it("varbinary is its own type, never read as varchar", () => {
    expect(normalizeColumnType("varbinary(256)", false)).toBe("varbinary(256)")
    expect(normalizeColumnType("VARBINARY(36)", false)).toBe("varbinary(36)")
    expect(normalizeColumnType("varchar(64)", false)).not.toBe(normalizeColumnType("varbinary(64)", false))
  })
})

it.layer(NodeContext.layer, { timeout: "90 seconds" })("exact identifiers on MariaDB", (it) => {
  it.scoped("0011 keeps existing rows; afterwards a user id or key with a trailing space matches nothing of victim1's", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("exact_identifiers")
      yield* Effect.gen(function*() {
        yield* migrationsBefore0011
        yield* insertLegacyRows
        // The flaw this migration removes: PAD SPACE makes "victim1 " victim1.
        expect(yield* countWhere("SELECT COUNT(*) AS n FROM ai_job WHERE user_id = ?", ["victim1 "])).toBe(1)
        const applied = yield* runMigrations
        // The pending migrations start with 0011 (later ones follow it).
        expect(applied.map(([id, name]) => `${id}_${name}`)[0]).toBe("11_exact_identifiers")
        // Re-runnable: a half-applied 0011 can simply run again.
        yield* exactIdentifiers
      }).pipe(Effect.provide(clientFor(scratch.url)))

      yield* Effect.gen(function*() {
        const jobs = yield* AiJobLifecycleRepository
        const credentials = yield* CredentialRepository
        const service = yield* AiJobService

        const legacy = Option.getOrThrow(yield* jobs.findById(legacyJobId))
        expect(legacy.userId).toBe("victim1")
        expect(legacy.id).toBe(legacyJobId)
        expect(legacy.idempotencyKey).toBe("legacy-key")
        expect(legacy.requestHash).toBeNull()

        // A user id "victim1 " written straight into the table is a user of its own.
        yield* insertJob(paddedUsersJobId, "victim1 ", "legacy-key")
        expect((yield* jobs.list({ userId: "victim1" }, { limit: 10 })).map((job) => job.id)).toEqual([legacyJobId])
        expect((yield* jobs.list({ userId: "victim1 " }, { limit: 10 })).map((job) => job.id)).toEqual([
          paddedUsersJobId
        ])
        expect(yield* jobs.countActive("victim1 ")).toBe(1)
        expect(Option.map(yield* jobs.findByIdempotencyKey("victim1", "synthetic_echo", "legacy-key"), (job) => job.id))
          .toEqual(Option.some(legacyJobId))
        expect(
          Option.map(yield* jobs.findByIdempotencyKey("victim1 ", "synthetic_echo", "legacy-key"), (job) => job.id)
        )
          .toEqual(Option.some(paddedUsersJobId))
        expect(Option.isNone(yield* jobs.findByIdempotencyKey("victim1", "synthetic_echo", "legacy-key "))).toBe(true)
        expect(Option.isNone(yield* jobs.findById(`${legacyJobId} `))).toBe(true)

        expect(yield* credentials.findActive("victim1 ", "deepseek")).toEqual(Option.none())
        expect(yield* credentials.listByUser("victim1 ")).toEqual([])
        expect(yield* credentials.revoke(legacyCredentialId, "victim1 ")).toBe(false)
        expect(Option.map(yield* credentials.findActive("victim1", "deepseek"), (row) => row.id)).toEqual(
          Option.some(legacyCredentialId)
        )

        // A row from before the request hash matches any request under its key, as it did.
        const repeated = yield* service.createJob({
          userId: "victim1",
          jobType: "synthetic_echo",
          targetType: "test",
          targetId: "t",
          idempotencyKey: "legacy-key",
          input: { message: "not the legacy input" }
        })
        expect(repeated).toMatchObject({ created: false, job: { id: legacyJobId } })

        // The quota gate keeps one row per exact user id.
        yield* service.createJob({
          userId: "victim1 ",
          jobType: "synthetic_echo",
          targetType: "test",
          targetId: "t",
          input: { message: "x" }
        })
        yield* service.createJob({
          userId: "victim1",
          jobType: "synthetic_echo",
          targetType: "test",
          targetId: "t",
          input: { message: "x" }
        })
        expect(
          yield* countWhere("SELECT COUNT(*) AS n FROM ai_user_job_gate WHERE user_id IN (?, ?)", [
            "victim1",
            "victim1 "
          ])
        )
          .toBe(2)
      }).pipe(Effect.provide(engineOn(scratch.url)))
    }))

  it.scoped("migrations-check --live fails on a database whose identifier columns are still VARCHAR, naming them", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("exact_identifiers_live")
      yield* Effect.gen(function*() {
        yield* runMigrations
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ALTER TABLE ai_job MODIFY COLUMN user_id VARCHAR(64) NOT NULL")
        yield* sql.unsafe("ALTER TABLE user_model_credential MODIFY COLUMN id CHAR(36) NOT NULL")
      }).pipe(Effect.provide(clientFor(scratch.url)))

      const live = yield* checkLiveDatabase(Redacted.make(scratch.url))
      const drift = live.differences.filter(isDrift).map(describeDifference)
      expect(drift).toHaveLength(2)
      expect(drift.join("\n")).toContain("ai_job.user_id")
      expect(drift.join("\n")).toContain("varbinary(256)")
      expect(drift.join("\n")).toContain("user_model_credential.id")
      expect(drift.join("\n")).toContain("identifiers must compare exactly: run migration 0011")
      expect(renderReport(live.subject, live.differences)).toContain("FAILED: 2 drift(s)")
    }))

  it.scoped("a database built before 0011 fails migrations-check --live until 0011 runs", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("exact_identifiers_before")
      yield* migrationsBefore0011.pipe(Effect.provide(clientFor(scratch.url)))
      const before = yield* checkLiveDatabase(Redacted.make(scratch.url))
      const drift = before.differences.filter(isDrift).map(describeDifference).join("\n")
      expect(drift).toContain("ai_job.user_id")
      expect(drift).toContain("ai_job.request_hash")
      expect(drift).toContain("ai_user_job_gate.user_id")

      yield* runMigrations.pipe(Effect.provide(clientFor(scratch.url)))
      const after = yield* checkLiveDatabase(Redacted.make(scratch.url))
      expect(after.differences.filter(isDrift)).toEqual([])
    }))
})
