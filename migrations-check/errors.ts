import { Data } from "effect"

/** The database could not be reached or opened (wrong host, credentials or database name). */
export class DatabaseUnreachable extends Data.TaggedError("DatabaseUnreachable")<{
  readonly target: string
  readonly cause: unknown
}> {
  override get message() {
    return `cannot connect to ${this.target}: ${causeMessage(this.cause)}`
  }
}

/** Creating or dropping the scratch database failed. */
export class ScratchDatabaseFailed extends Data.TaggedError("ScratchDatabaseFailed")<{
  readonly action: "create" | "drop"
  readonly database: string
  readonly cause: unknown
}> {
  override get message() {
    return `could not ${this.action} scratch database ${this.database}: ${causeMessage(this.cause)}`
  }
}

/** A migration failed while building the scratch database: the migrations themselves are broken. */
export class MigrationsFailed extends Data.TaggedError("MigrationsFailed")<{
  readonly target: string
  readonly cause: unknown
}> {
  override get message() {
    return `applying the migrations to ${this.target} failed: ${causeMessage(this.cause)}`
  }
}

/** Reading information_schema failed, or returned rows of a shape we do not understand. */
export class IntrospectionFailed extends Data.TaggedError("IntrospectionFailed")<{
  readonly step: string
  readonly cause: unknown
}> {
  override get message() {
    return `reading information_schema (${this.step}) failed: ${causeMessage(this.cause)}`
  }
}

/** The database differs from the declared schema; the diff has already been printed. */
export class SchemaDriftDetected extends Data.TaggedError("SchemaDriftDetected")<{
  readonly target: string
  readonly driftCount: number
}> {
  override get message() {
    return `${this.driftCount} difference(s) between ${this.target} and the declared schema (diff above)`
  }
}

/** The messages down a cause chain: `SqlError`'s own message ("Failed to connect") hides the reason. */
const causeMessage = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const inner: unknown = cause.cause
  return inner instanceof Error && inner.message !== cause.message
    ? `${cause.message}: ${causeMessage(inner)}`
    : cause.message
}
