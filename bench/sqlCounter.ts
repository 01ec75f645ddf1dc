import type { Context, Exit } from "effect"
import { Option, Tracer } from "effect"
import { implicitBeginAttribute } from "../src/layers/mysql/MysqlUnitOfWork.js"

/**
 * Counts the SQL the engine issues, by watching `@effect/sql`'s own spans: every statement runs
 * in a `sql.execute` span (its text in `db.query.text`) and every transaction in a
 * `sql.transaction` span that records a `db.transaction.commit` or `...rollback` event. The
 * tracer is installed on the bench's runtime, so it sees exactly the statements of this
 * process's engine and nothing of any other client of the server (unlike `SHOW GLOBAL STATUS`).
 *
 * A "commit" is a durable transaction end: an explicit COMMIT, or a write statement (INSERT,
 * UPDATE, DELETE) run outside a transaction, which InnoDB commits by itself (autocommit).
 */
export interface SqlCounts {
  /** Statements sent by the engine, BEGIN and COMMIT/ROLLBACK included. */
  readonly statements: number
  readonly selects: number
  readonly inserts: number
  readonly updates: number
  readonly deletes: number
  /** Explicit transactions that committed (one COMMIT each). */
  readonly transactionCommits: number
  readonly rollbacks: number
  /** INSERT/UPDATE/DELETE outside any transaction: each one is its own commit. */
  readonly autocommitWrites: number
}

export const emptyCounts: SqlCounts = {
  statements: 0,
  selects: 0,
  inserts: 0,
  updates: 0,
  deletes: 0,
  transactionCommits: 0,
  rollbacks: 0,
  autocommitWrites: 0
}

export const commitsOf = (counts: SqlCounts) => counts.transactionCommits + counts.autocommitWrites

export const diffCounts = (after: SqlCounts, before: SqlCounts): SqlCounts => ({
  statements: after.statements - before.statements,
  selects: after.selects - before.selects,
  inserts: after.inserts - before.inserts,
  updates: after.updates - before.updates,
  deletes: after.deletes - before.deletes,
  transactionCommits: after.transactionCommits - before.transactionCommits,
  rollbacks: after.rollbacks - before.rollbacks,
  autocommitWrites: after.autocommitWrites - before.autocommitWrites
})

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const queryTextAttribute = "db.query.text"

/** A span that only keeps what the counter needs; it exports nothing anywhere. */
class CountingSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly sampled = true
  status: Tracer.SpanStatus
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink>

  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    private readonly onEnd: (span: CountingSpan) => void,
    private readonly onEvent: (name: string, span: CountingSpan) => void,
    id: number
  ) {
    this.status = { _tag: "Started", startTime }
    this.spanId = id.toString(16)
    this.traceId = Option.isSome(parent) ? parent.value.traceId : `bench-${this.spanId}`
    this.links = [...links]
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    this.onEnd(this)
  }

  attribute(key: string, value: unknown): void {
    // Only the statement text and how a transaction began matter; others are dropped to keep spans small.
    if (key === queryTextAttribute || key === implicitBeginAttribute) this.attributes.set(key, value)
  }

  event(name: string): void {
    this.onEvent(name, this)
  }

  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links.push(...links)
  }
}

const isOpenTransaction = (span: Tracer.AnySpan) =>
  span._tag === "Span" && span.name === "sql.transaction" && span.status._tag === "Started"

/**
 * Whether a span runs inside an open `sql.transaction`: one of its parents, or linked from one of
 * them (a group commit's member runs under its own job's span, linked to the group's transaction).
 */
const insideTransaction = (span: CountingSpan): boolean => {
  let current = span.parent
  while (Option.isSome(current)) {
    const parent = current.value
    if (parent._tag === "ExternalSpan") return false
    if (isOpenTransaction(parent) || parent.links.some((link) => isOpenTransaction(link.span))) return true
    current = parent.parent
  }
  return false
}

export interface SqlCounter {
  readonly tracer: Tracer.Tracer
  /** The totals so far (a copy). */
  readonly snapshot: () => SqlCounts
  /** Statements so far by their shape (verb, table, first words), for finding the ones that add up. */
  readonly byStatement: () => ReadonlyMap<string, number>
}

/** `UPDATE ai_job SET lifecycle_status = ...` → `UPDATE ai_job SET lifecycle_status`: enough to tell statements apart. */
const shapeOf = (text: string, autocommit: boolean) =>
  text.replace(/\s+/g, " ").trim().split(" ").slice(0, 5).join(" ").replace(/[(,].*$/, "") +
  (autocommit ? " [autocommit]" : "")

export const makeSqlCounter = (): SqlCounter => {
  const counts: Mutable<SqlCounts> = { ...emptyCounts }
  const shapes = new Map<string, number>()
  let nextId = 1

  const onStatementEnd = (span: CountingSpan) => {
    if (span.name !== "sql.execute") return
    counts.statements += 1
    const text = span.attributes.get(queryTextAttribute)
    const verb = typeof text === "string" ? text.trimStart().slice(0, 6).toUpperCase() : ""
    const write = verb === "INSERT" || verb === "UPDATE" || verb === "DELETE"
    if (verb === "SELECT") counts.selects += 1
    if (verb === "INSERT") counts.inserts += 1
    if (verb === "UPDATE") counts.updates += 1
    if (verb === "DELETE") counts.deletes += 1
    const autocommit = write && !insideTransaction(span)
    if (autocommit) counts.autocommitWrites += 1
    const shape = shapeOf(typeof text === "string" ? text : "?", autocommit)
    shapes.set(shape, (shapes.get(shape) ?? 0) + 1)
  }

  const onEvent = (name: string, span: CountingSpan) => {
    // BEGIN (unless the transaction opened without one) and COMMIT / ROLLBACK, sent outside any `sql.execute` span.
    const ends = span.attributes.get(implicitBeginAttribute) === "implicit" ? 1 : 2
    if (name === "db.transaction.commit") {
      counts.transactionCommits += 1
      counts.statements += ends
    } else if (name === "db.transaction.savepoint") {
      counts.statements += 1 // the SAVEPOINT of a nested transaction
    } else if (name === "db.transaction.rollback") {
      counts.rollbacks += 1
      counts.statements += ends
    }
  }

  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) =>
      new CountingSpan(name, parent, context, links, startTime, kind, onStatementEnd, onEvent, nextId++),
    context: (f) => f()
  })

  return { tracer, snapshot: () => ({ ...counts }), byStatement: () => new Map(shapes) }
}
