import { isDrift, SchemaDifference } from "./compare.js"
import type { DeclaredColumn } from "./DeclaredSchema.js"

/** What was compared, for the report's heading. */
export interface CheckSubject {
  /** `migrations`: a scratch database built from the migrations; `live`: a database as it stands. */
  readonly mode: "migrations" | "live"
  /** The database, as `user@host:port/database` (never with a password). */
  readonly target: string
  readonly serverVersion: string
  /** The migrations applied to the scratch database, by `{id}_{name}`. */
  readonly appliedMigrations: ReadonlyArray<string>
}

const columnList = (columns: ReadonlyArray<string>) => `(${columns.join(", ")})`

const describeColumn = (column: DeclaredColumn) =>
  `${column.type} ${column.nullable ? "NULL" : "NOT NULL"}${
    column.defaultValue === undefined ? "" : ` DEFAULT ${column.defaultValue}`
  }`

const nullability = (nullable: boolean) => (nullable ? "NULL" : "NOT NULL")

/** An identifier the code declares VARBINARY that is still a PAD SPACE text column. */
const paddedIdentifier = (expected: string, actual: string) =>
  expected.startsWith("varbinary(") && (actual.startsWith("varchar(") || actual.startsWith("char("))

/** One line per difference, naming `table.column` so it can be searched for. */
export const describeDifference: (difference: SchemaDifference) => string = SchemaDifference.$match({
  MissingTable: ({ table }) => `${table}: table is missing`,
  UndeclaredTable: ({ table }) => `${table}: table exists but the code does not declare it`,
  MissingColumn: ({ table, column }) =>
    `${table}.${column.name}: column is missing (expected ${describeColumn(column)})`,
  UndeclaredColumn: ({ table, column, reportedType }) =>
    `${table}.${column}: column ${reportedType} is not declared (allowed: operators may add columns)`,
  ColumnTypeMismatch: ({ table, column, expected, actual, reportedType }) =>
    `${table}.${column}: type is ${actual}${
      reportedType === actual ? "" : ` (reported as ${reportedType})`
    }, expected ${expected}${
      paddedIdentifier(expected, actual)
        ? " (text columns ignore trailing spaces; identifiers must compare exactly: run migration 0011)"
        : ""
    }`,
  ColumnNullabilityMismatch: ({ table, column, expectedNullable }) =>
    `${table}.${column}: column is ${nullability(!expectedNullable)}, expected ${nullability(expectedNullable)}`,
  ColumnDefaultMismatch: ({ table, column, expected, actual }) =>
    `${table}.${column}: default is ${actual ?? "none"}, expected ${expected}`,
  PrimaryKeyMismatch: ({ table, expected, actual }) =>
    actual.length === 0
      ? `${table}: primary key is missing (expected ${columnList(expected)})`
      : `${table}: primary key is ${columnList(actual)}, expected ${columnList(expected)}`,
  MissingUniqueKey: ({ table, columns }) => `${table}: unique key ${columnList(columns)} is missing`,
  MissingIndex: ({ table, columns }) => `${table}: index ${columnList(columns)} is missing`,
  UndeclaredUniqueKey: ({ table, name, columns }) =>
    `${table}: unique key ${name} ${columnList(columns)} is not declared (it may reject writes the code expects)`,
  UndeclaredIndex: ({ table, name, columns }) => `${table}: index ${name} ${columnList(columns)} is not declared`
})

/** The readable diff: a heading, then the drift (which fails the check), then the notes. */
export const renderReport = (subject: CheckSubject, differences: ReadonlyArray<SchemaDifference>): string => {
  const drift = differences.filter(isDrift)
  const notes = differences.filter((difference) => !isDrift(difference))
  const heading = subject.mode === "migrations"
    ? `migrations-check: scratch database ${subject.target} (${subject.serverVersion}), ` +
      `built by ${subject.appliedMigrations.length} migration(s), compared with the declared schema`
    : `migrations-check --live: ${subject.target} (${subject.serverVersion}) as it stands, compared with the declared schema`

  const section = (title: string, marker: string, items: ReadonlyArray<SchemaDifference>) =>
    items.length === 0
      ? []
      : [``, `${title} (${items.length}):`, ...items.map((item) => `  ${marker} ${describeDifference(item)}`)]

  const verdict = drift.length === 0
    ? `OK: no drift${notes.length === 0 ? "" : ` (${notes.length} note(s))`}`
    : `FAILED: ${drift.length} drift(s)`

  return [
    heading,
    ...section("Drift", "-", drift),
    ...section("Notes", "~", notes),
    ``,
    verdict
  ].join("\n")
}
