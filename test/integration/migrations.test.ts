import { NodeContext } from "@effect/platform-node"
import { SqlClient, SqlSchema } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted, Schema } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { checkLiveDatabase, checkMigrationsBuildDeclaredSchema } from "../../migrations-check/check.js"
import { compareSchemas, isDrift, SchemaDifference } from "../../migrations-check/compare.js"
import { type DeclaredColumnType, declaredSchema } from "../../migrations-check/DeclaredSchema.js"
import type { IntrospectedSchema } from "../../migrations-check/introspect.js"
import { introspectCurrentDatabase } from "../../migrations-check/introspect.js"
import {
  jsonValidatedColumn,
  normalizeColumnDefault,
  normalizeColumnType
} from "../../migrations-check/normalizeType.js"
import { describeDifference, renderReport } from "../../migrations-check/report.js"
import { runMigrations } from "../../src/layers/mysql/migrate.js"
import { mysqlClientLayer } from "../../src/layers/mysql/MysqlDatabase.js"
import { acquireScratchDatabase, testServerUrl } from "../support/scratchDatabase.js"

const repositoryRoot = fileURLToPath(new URL("../..", import.meta.url))

const clientFor = (url: string) => mysqlClientLayer(Redacted.make(url), { maxConnections: 2 })

const dropProgressColumn = SqlClient.SqlClient.pipe(
  Effect.flatMap((sql) => sql.unsafe("ALTER TABLE ai_job DROP COLUMN progress"))
)

const databaseExists = (name: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const count = yield* SqlSchema.single({
      Request: Schema.String,
      Result: Schema.Struct({ found: Schema.Union(Schema.Number, Schema.NumberFromString) }),
      execute: (schema) => sql`SELECT COUNT(*) AS found FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ${schema}`
    })(name)
    return count.found > 0
  }).pipe(Effect.provide(clientFor(testServerUrl)))

interface ProgramRun {
  readonly exitCode: number | null
  readonly output: string
}

/** Runs one of the repository's built programs (`dist/{program}.js`, what `npm run` runs), and collects its exit code and output. */
const runProgram = (
  program: "migrate" | "migrations-check",
  args: ReadonlyArray<string>,
  databaseUrl: string | undefined
) =>
  Effect.async<ProgramRun>((resume) => {
    const { DATABASE_URL: _inherited, ...environment } = process.env
    const child = spawn("node", [`dist/${program}.js`, ...args], {
      cwd: repositoryRoot,
      env: databaseUrl === undefined ? environment : { ...environment, DATABASE_URL: databaseUrl },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.on("close", (exitCode) => resume(Effect.succeed({ exitCode, output })))
    return Effect.sync(() => child.kill())
  })

describe("normalizing reported column types", () => {
  it("drops integer display widths (MariaDB int(11), MySQL 8 int)", () => {
    expect(normalizeColumnType("int(11)", false)).toBe("int")
    expect(normalizeColumnType("bigint(20)", false)).toBe("bigint")
    expect(normalizeColumnType("INT", false)).toBe("int")
    expect(normalizeColumnType("int(10) unsigned", false)).toBe("int unsigned")
    expect(normalizeColumnType("varchar(64)", false)).toBe("varchar(64)")
    expect(normalizeColumnType("datetime(3)", false)).toBe("datetime(3)")
  })

  it("reads column defaults the same from MariaDB and MySQL 8", () => {
    expect(normalizeColumnDefault(null)).toBeUndefined()
    expect(normalizeColumnDefault("NULL")).toBeUndefined()
    expect(normalizeColumnDefault("current_timestamp(3)")).toBe("current_timestamp(3)")
    expect(normalizeColumnDefault("CURRENT_TIMESTAMP(3)")).toBe("current_timestamp(3)")
    expect(normalizeColumnDefault("'pending'")).toBe("pending")
    expect(normalizeColumnDefault("0")).toBe("0")
  })

  it("reads MariaDB's longtext with a json_valid check as json, and nothing else", () => {
    expect(jsonValidatedColumn("json_valid(`input`)")).toBe("input")
    expect(jsonValidatedColumn("`score` between 0 and 100")).toBeUndefined()
    expect(normalizeColumnType("longtext", true)).toBe("json")
    expect(normalizeColumnType("longtext", false)).toBe("longtext")
    expect(normalizeColumnType("json", false)).toBe("json")
  })

  // The suite runs on MariaDB; this proves the MySQL 8 spelling of the same schema passes too.
  it("accepts the declared schema as MySQL 8 and as MariaDB report it", () => {
    const reportAs = (flavor: "mysql8" | "mariadb") => (type: DeclaredColumnType) => {
      if (flavor === "mysql8") return { reportedType: type, hasJsonCheck: false }
      if (type === "json") return { reportedType: "longtext", hasJsonCheck: true }
      if (type === "int") return { reportedType: "int(11)", hasJsonCheck: false }
      if (type === "bigint") return { reportedType: "bigint(20)", hasJsonCheck: false }
      return { reportedType: type, hasJsonCheck: false }
    }
    const asReportedBy = (flavor: "mysql8" | "mariadb"): IntrospectedSchema => ({
      database: "reported",
      serverVersion: flavor,
      tables: declaredSchema.map((table) => ({
        name: table.name,
        columns: table.columns.map((column) => {
          const reported = reportAs(flavor)(column.type)
          return {
            name: column.name,
            type: normalizeColumnType(reported.reportedType, reported.hasJsonCheck),
            reportedType: reported.reportedType,
            nullable: column.nullable,
            defaultValue: normalizeColumnDefault(
              column.defaultValue === undefined ?
                (flavor === "mariadb" && column.nullable ? "NULL" : null)
                : flavor === "mysql8"
                ? column.defaultValue.toUpperCase()
                : column.defaultValue
            )
          }
        }),
        indexes: [
          { name: "PRIMARY", columns: table.primaryKey, unique: true, primary: true },
          ...table.uniqueKeys.map((columns, n) => ({ name: `uq_${n}`, columns, unique: true, primary: false })),
          ...table.indexes.map((columns, n) => ({ name: `idx_${n}`, columns, unique: false, primary: false }))
        ]
      }))
    })
    expect(compareSchemas(declaredSchema, asReportedBy("mysql8"))).toEqual([])
    expect(compareSchemas(declaredSchema, asReportedBy("mariadb"))).toEqual([])
  })
})

it.layer(NodeContext.layer)("migrations on a scratch database", (it) => {
  it.scoped("migrate applies every migration once; a second run applies nothing and succeeds", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("migrations_twice")
      const [first, second] = yield* Effect.all([runMigrations, runMigrations]).pipe(
        Effect.provide(clientFor(scratch.url))
      )
      expect(first.map(([id, name]) => `${id}_${name}`)).toEqual([
        "1_ai_job",
        "2_ai_job_snapshot",
        "3_ai_job_artifact",
        "4_outbox_event",
        "5_ai_usage_log",
        "6_user_model_credential",
        "7_flashcard",
        "8_learning_evaluation",
        "9_ai_user_job_gate",
        "10_synthetic_echo_result",
        "11_exact_identifiers",
        "12_usage_call_unique",
        "13_business_created_at_default",
        "14_learning_analysis",
        "15_job_trace_parent",
        "16_job_retried_from",
        "17_outbox_event_lane",
        "18_usage_estimated",
        "19_ai_job_batch"
      ])
      expect(second).toEqual([])
    }))

  it.scoped("the migrated database matches the declared schema; without ai_job.progress it drifts", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("migrations_drift")
      yield* Effect.gen(function*() {
        yield* runMigrations
        const migrated = yield* introspectCurrentDatabase
        expect(migrated.tables.map((table) => table.name)).not.toContain("effect_sql_migrations")
        expect(compareSchemas(declaredSchema, migrated)).toEqual([])

        yield* dropProgressColumn
        const differences = compareSchemas(declaredSchema, yield* introspectCurrentDatabase)
        const drift = differences.filter(isDrift)
        expect(drift).toHaveLength(1)
        expect(SchemaDifference.$is("MissingColumn")(drift[0])).toBe(true)
        expect(drift.map(describeDifference).join("\n")).toContain("ai_job.progress")
      }).pipe(Effect.provide(clientFor(scratch.url)))

      const live = yield* checkLiveDatabase(Redacted.make(scratch.url))
      expect(live.subject.mode).toBe("live")
      const report = renderReport(live.subject, live.differences)
      expect(report).toContain("ai_job.progress: column is missing (expected int NOT NULL)")
      expect(report).toContain("FAILED: 1 drift(s)")
    }))

  it.scoped("a business created_at without its default is drift, named with the default it needs", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("migrations_default")
      yield* Effect.gen(function*() {
        yield* runMigrations
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ALTER TABLE flashcard MODIFY COLUMN created_at DATETIME(3) NOT NULL")
      }).pipe(Effect.provide(clientFor(scratch.url)))
      const live = yield* checkLiveDatabase(Redacted.make(scratch.url))
      const report = renderReport(live.subject, live.differences)
      expect(report).toContain("flashcard.created_at: default is none, expected current_timestamp(3)")
      expect(report).toContain("FAILED: 1 drift(s)")
    }))

  it.scoped("an operator's extra column is a note, not drift", () =>
    Effect.gen(function*() {
      const scratch = yield* acquireScratchDatabase("migrations_extra")
      yield* Effect.gen(function*() {
        yield* runMigrations
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ALTER TABLE ai_job ADD COLUMN operator_note VARCHAR(64) NULL")
      }).pipe(Effect.provide(clientFor(scratch.url)))
      const live = yield* checkLiveDatabase(Redacted.make(scratch.url))
      expect(live.differences.filter(isDrift)).toEqual([])
      expect(live.differences.map(describeDifference).join("\n")).toContain("ai_job.operator_note")
    }))

  it.scoped("the default check builds, compares and drops its own scratch database", () =>
    Effect.gen(function*() {
      const outcome = yield* checkMigrationsBuildDeclaredSchema(Redacted.make(testServerUrl))
      expect(outcome.subject.appliedMigrations).toHaveLength(19)
      expect(outcome.differences).toEqual([])
      const scratchName = outcome.subject.target.split("/").at(-1) ?? ""
      expect(scratchName).toMatch(/^migrations_check_[0-9a-f]+$/)
      expect(yield* databaseExists(scratchName)).toBe(false)
    }))
})

// Real processes on a real clock: these run the programs exactly as `npm run` does.
describe("the migrate and migrations-check programs", () => {
  it.scopedLive(
    "migrate twice, check passes, then --live fails naming the dropped column",
    () =>
      Effect.gen(function*() {
        const scratch = yield* acquireScratchDatabase("migrations_cli")

        const firstMigrate = yield* runProgram("migrate", [], scratch.url)
        expect(firstMigrate.exitCode, firstMigrate.output).toBe(0)
        expect(firstMigrate.output).toContain("Applied migration 0001_ai_job")
        const secondMigrate = yield* runProgram("migrate", [], scratch.url)
        expect(secondMigrate.exitCode, secondMigrate.output).toBe(0)
        expect(secondMigrate.output).toContain("No pending migrations")

        const liveBefore = yield* runProgram("migrations-check", ["--live"], scratch.url)
        expect(liveBefore.exitCode, liveBefore.output).toBe(0)

        yield* dropProgressColumn.pipe(Effect.provide(clientFor(scratch.url)))
        const liveAfter = yield* runProgram("migrations-check", ["--live"], scratch.url)
        expect(liveAfter.exitCode).not.toBe(0)
        expect(liveAfter.output).toContain("ai_job.progress")
      }),
    { timeout: 90_000 }
  )

  it.scopedLive(
    "migrations-check (default mode) exits 0 and leaves no scratch database behind",
    () =>
      Effect.gen(function*() {
        const run = yield* runProgram("migrations-check", [], testServerUrl)
        expect(run.exitCode, run.output).toBe(0)
        expect(run.output).toContain("OK: no drift")
        const scratchName = /migrations_check_[0-9a-f]+/.exec(run.output)?.[0] ?? ""
        expect(scratchName).not.toBe("")
        expect(yield* databaseExists(scratchName)).toBe(false)
      }),
    { timeout: 60_000 }
  )

  it.scopedLive("migrate without DATABASE_URL fails with a message naming it", () =>
    Effect.gen(function*() {
      const run = yield* runProgram("migrate", [], undefined)
      expect(run.exitCode).not.toBe(0)
      expect(run.output).toContain("DATABASE_URL")
    }), { timeout: 60_000 })
})
