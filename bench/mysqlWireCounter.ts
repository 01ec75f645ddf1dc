import { Effect } from "effect"
import { createConnection, createServer, type Socket } from "node:net"
import { diffCounts, emptyCounts, type SqlCounts } from "./sqlCounter.js"

/**
 * A TCP proxy in front of MySQL that counts the statements one client process sends, read off the
 * wire: the engine's driver (mysql2, through @effect/sql) runs statements as prepared statements
 * (COM_STMT_PREPARE once per connection and text, then COM_STMT_EXECUTE by id) and BEGIN, COMMIT
 * and session settings as COM_QUERY text. A process pointed at its own proxy is counted alone, whatever
 * else talks to the server (unlike `SHOW GLOBAL STATUS`), and without tracing it (unlike the
 * in-process `sqlCounter`).
 */
export interface WireCounts extends SqlCounts {
  /** Commands sent (COM_QUERY, COM_STMT_EXECUTE, COM_STMT_PREPARE): `SET SESSION …; BEGIN` sent together is one round trip, two statements. */
  readonly roundTrips: number
  /** COM_STMT_PREPARE: a statement text a connection had not prepared before. */
  readonly prepares: number
  /** Statements naming `outbox_event` besides the event's INSERT (which is part of the create): claims, marks, sweeps. */
  readonly outboxStatements: number
  /** Statements by the start of their text (whitespace collapsed), so a missed target can name them. */
  readonly byText: Readonly<Record<string, number>>
}

export const emptyWireCounts: WireCounts = {
  ...emptyCounts,
  roundTrips: 0,
  prepares: 0,
  outboxStatements: 0,
  byText: {}
}

export const diffWireCounts = (after: WireCounts, before: WireCounts): WireCounts => ({
  ...diffCounts(after, before),
  roundTrips: after.roundTrips - before.roundTrips,
  prepares: after.prepares - before.prepares,
  outboxStatements: after.outboxStatements - before.outboxStatements,
  byText: Object.fromEntries(
    Object.entries(after.byText)
      .map(([text, n]) => [text, n - (before.byText[text] ?? 0)] as const)
      .filter(([, n]) => n > 0)
  )
})

/** How much of a statement's text keys `byText`: enough for its verb, table and the start of its clauses. */
const textKeyLength = 60
const textKeyOf = (text: string) => text.replace(/\s+/g, " ").trim().slice(0, textKeyLength)

export interface MysqlWireCounter {
  readonly port: number
  /** The totals so far (a copy). */
  readonly snapshot: () => WireCounts
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const comQuery = 0x03
const comStmtPrepare = 0x16
const comStmtExecute = 0x17
/** Enough of a statement's text to tell its verb and whether it names the outbox table. */
const textPrefixBytes = 512

/**
 * The statements of one COM_QUERY: session and transaction control sent ahead of a statement
 * (`SET SESSION …; BEGIN`) is split off; anything else is one statement (its values may hold ';').
 */
const statementsOf = (text: string): ReadonlyArray<string> => {
  const control = /^\s*(SET|BEGIN|START|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b[^;'"`]*;/i.exec(text)
  return control === null
    ? [text]
    : [control[0].slice(0, -1), ...statementsOf(text.slice(control[0].length))].filter((t) => t.trim() !== "")
}

/** Calls `onPacket(sequence, payload)` for each whole MySQL packet (3-byte length, sequence id, payload) of a byte stream. */
const packetReader = (onPacket: (sequence: number, payload: Buffer) => void) => {
  let pending: Buffer = Buffer.alloc(0)
  return (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let at = 0
    while (pending.length - at >= 4) {
      const length = pending.readUIntLE(at, 3)
      if (pending.length - at < 4 + length) break
      onPacket(pending[at + 3] ?? 0, pending.subarray(at + 4, at + 4 + length))
      at += 4 + length
    }
    pending = at === pending.length ? Buffer.alloc(0) : pending.subarray(at)
  }
}

const textOf = (payload: Buffer) => payload.toString("utf8", 1, Math.min(payload.length, 1 + textPrefixBytes))

/**
 * One connection's conversation: commands from the client (sequence 0 starts one; the handshake's
 * packets never do), and the server's first answer to a prepare, which carries the statement id
 * its executes will name. mysql2 waits for each answer before the next command, so the next
 * sequence-1 packet from the server answers the prepare just sent.
 */
const conversation = (
  onStatement: (text: string) => void,
  onCommand: (kind: "query" | "prepare" | "execute") => void
) => {
  const prepared = new Map<number, string>()
  let awaitingPrepare: string | undefined
  const fromClient = packetReader((sequence, payload) => {
    if (sequence !== 0 || payload.length === 0) return
    const command = payload[0]
    if (command === comQuery) {
      onCommand("query")
      for (const statement of statementsOf(textOf(payload))) onStatement(statement)
    } else if (command === comStmtPrepare) {
      onCommand("prepare")
      awaitingPrepare = textOf(payload)
    } else if (command === comStmtExecute && payload.length >= 5) {
      onCommand("execute")
      onStatement(prepared.get(payload.readUInt32LE(1)) ?? "")
    }
  })
  const fromServer = packetReader((sequence, payload) => {
    if (sequence !== 1 || awaitingPrepare === undefined) return
    if (payload[0] === 0x00 && payload.length >= 5) prepared.set(payload.readUInt32LE(1), awaitingPrepare)
    awaitingPrepare = undefined
  })
  return { fromClient, fromServer }
}

/** Starts a counting proxy to `upstream` on a free loopback port; it closes with the scope. */
export const startMysqlWireCounter = (upstream: { readonly host: string; readonly port: number }) =>
  Effect.acquireRelease(
    Effect.async<{ readonly counter: MysqlWireCounter; readonly close: () => void }>((resume) => {
      const counts: Mutable<WireCounts> = { ...emptyWireCounts }
      const byText = new Map<string, number>()
      const sockets = new Set<Socket>()
      const countOn = () => {
        let inTransaction = false
        // A session with autocommit off is always in a transaction: its first statement opens one.
        let autocommitOff = false
        const countStatement = (text: string) => {
          const verb = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? ""
          counts.statements += 1
          const key = textKeyOf(text)
          byText.set(key, (byText.get(key) ?? 0) + 1)
          if (verb === "SET") {
            const autocommit = /\bautocommit\s*=\s*(\w+)/i.exec(text)?.[1]?.toUpperCase()
            if (autocommit !== undefined) autocommitOff = autocommit === "0" || autocommit === "OFF"
          } else if (autocommitOff && verb !== "COMMIT" && verb !== "ROLLBACK") {
            inTransaction = true
          }
          if (verb !== "INSERT" && /\boutbox_event\b/.test(text)) counts.outboxStatements += 1
          if (verb === "SELECT") counts.selects += 1
          if (verb === "INSERT") counts.inserts += 1
          if (verb === "UPDATE") counts.updates += 1
          if (verb === "DELETE") counts.deletes += 1
          if (verb === "BEGIN" || (verb === "START" && /^\s*START\s+TRANSACTION/i.test(text))) inTransaction = true
          else if (verb === "COMMIT") {
            if (inTransaction) counts.transactionCommits += 1
            inTransaction = false
          } else if (verb === "ROLLBACK" && !/^\s*ROLLBACK\s+TO/i.test(text)) {
            counts.rollbacks += 1
            inTransaction = false
          } else if (!inTransaction && (verb === "INSERT" || verb === "UPDATE" || verb === "DELETE")) {
            counts.autocommitWrites += 1
          }
        }
        return conversation(countStatement, (kind) => {
          counts.roundTrips += 1
          if (kind === "prepare") counts.prepares += 1
        })
      }
      const server = createServer((client) => {
        const server = createConnection(upstream)
        sockets.add(client)
        sockets.add(server)
        const read = countOn()
        client.on("data", (chunk: Buffer) => {
          read.fromClient(chunk)
          server.write(chunk)
        })
        server.on("data", (chunk: Buffer) => {
          read.fromServer(chunk)
          client.write(chunk)
        })
        const close = () => {
          client.destroy()
          server.destroy()
          sockets.delete(client)
          sockets.delete(server)
        }
        client.on("error", close).on("close", close)
        server.on("error", close).on("close", close)
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({
          counter: { port, snapshot: () => ({ ...counts, byText: Object.fromEntries(byText) }) },
          close: () => {
            for (const socket of sockets) socket.destroy()
            server.close()
          }
        }))
      })
    }),
    ({ close }) => Effect.sync(close)
  ).pipe(Effect.map(({ counter }) => counter))
