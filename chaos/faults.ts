import { SqlClient } from "@effect/sql"
import { Array as Arr, Clock, Duration, Effect, FiberSet, Random, Schema, type Scope } from "effect"
import type { Fleet, Role } from "./fleet.js"
import type { ChaosProvider, ProviderMode } from "./provider.js"
import type { ChaosRedis } from "./redis.js"

/**
 * The seeded fault schedule and the injector that carries it out while the load runs. A plan
 * holds every fault kind at least once, in an order and at times drawn from the seed; a process
 * fault waits until another process of the same role is serving, so the fleet degrades but
 * never loses a whole role at once. Killing or stopping a worker records the jobs it held and
 * watches them until another worker has them (or they end): the recovery times.
 */

export const faultKinds = [
  "kill9:api",
  "kill9:dispatcher",
  "kill9:worker",
  "sigterm:api",
  "sigterm:dispatcher",
  "sigterm:worker",
  "rolling-restart:worker",
  "sigstop:api",
  "sigstop:dispatcher",
  "sigstop:worker",
  "mysql:kill-connections",
  "redis:restart",
  "redis:pause",
  "provider:500",
  "provider:429",
  "provider:slow",
  "provider:malformed"
] as const
export type FaultKind = (typeof faultKinds)[number]

export interface PlannedFault {
  readonly atMs: number
  readonly kind: FaultKind
  /** Which process of the role, when it is serving (another one otherwise). */
  readonly pick: number
}

export interface FaultTiming {
  /** How long a SIGSTOP lasts, per role: longer than the lease for workers, the claim for dispatchers. */
  readonly stopMs: Readonly<Record<Role, number>>
  readonly providerWindowMs: number
  readonly redisPauseMs: number
  /** Between two SIGTERMs of a rolling restart: shorter than a worker's restart, so hand-offs land on stopping workers. */
  readonly rollingStepMs: number
}

/** Every kind once, then `extra` more drawn at random; spread over [startMs, endMs] with jitter. */
export const planFaults = (
  seed: number,
  options: { readonly startMs: number; readonly endMs: number; readonly extra: number }
) =>
  Effect.gen(function*() {
    const extras = yield* Effect.forEach(Array.from({ length: options.extra }), () =>
      Effect.map(Random.nextIntBetween(0, faultKinds.length), (i) => faultKinds[i] ?? "redis:pause"))
    const kinds = yield* Random.shuffle([...faultKinds, ...extras])
    const count = Math.max(1, kinds.length)
    const step = (options.endMs - options.startMs) / count
    return yield* Effect.forEach(kinds, (kind, i) =>
      Effect.gen(function*() {
        const jitter = (yield* Random.next) * step * 0.6
        return {
          atMs: Math.round(options.startMs + i * step + jitter),
          kind,
          pick: yield* Random.nextIntBetween(0, 100)
        } satisfies PlannedFault
      }))
  }).pipe(Effect.withRandom(Random.make(`faults:${seed}`)))

export interface InjectedFault {
  readonly kind: FaultKind
  readonly atMs: number
  readonly target: string
}

export interface Recovery {
  readonly kind: "kill9" | "sigstop" | "sigterm" | "rolling"
  readonly jobId: string
  /** From the fault to the first sight of the job with another owner (or ended); undefined if never. */
  readonly ms: number | undefined
  /** Another worker took it over, or it ended without one (a frozen owner finished it, a cancel). */
  readonly how: "taken over" | "ended" | "never"
}

export interface InjectionReport {
  readonly injected: ReadonlyArray<InjectedFault>
  readonly skipped: ReadonlyArray<{ readonly kind: FaultKind; readonly reason: string }>
  readonly problems: ReadonlyArray<string>
  readonly recoveries: ReadonlyArray<Recovery>
  readonly killedConnections: number
  readonly crashedJobs: ReadonlySet<string>
  readonly frozenJobs: ReadonlySet<string>
  readonly handedOffJobs: ReadonlySet<string>
  /** When Redis was paused (epoch ms, from the CLIENT PAUSE to its end). */
  readonly redisPauses: ReadonlyArray<{ readonly fromMs: number; readonly toMs: number }>
  /** When an API was stopped or down (epoch ms, from the signal until it served again). */
  readonly apiOutages: ReadonlyArray<{ readonly apiUrl: string; readonly fromMs: number; readonly toMs: number }>
}

const HeldJob = Schema.Struct({ id: Schema.String })
const JobOwner = Schema.Struct({
  id: Schema.String,
  lockedBy: Schema.NullOr(Schema.String),
  lifecycleStatus: Schema.String
})
const ConnectionId = Schema.Struct({ id: Schema.Int })

const processFaults: Partial<
  Record<FaultKind, { readonly role: Role; readonly signal: "SIGKILL" | "SIGTERM" | "SIGSTOP" }>
> = {
  "kill9:api": { role: "api", signal: "SIGKILL" },
  "kill9:dispatcher": { role: "dispatcher", signal: "SIGKILL" },
  "kill9:worker": { role: "worker", signal: "SIGKILL" },
  "sigterm:api": { role: "api", signal: "SIGTERM" },
  "sigterm:dispatcher": { role: "dispatcher", signal: "SIGTERM" },
  "sigterm:worker": { role: "worker", signal: "SIGTERM" },
  "sigstop:api": { role: "api", signal: "SIGSTOP" },
  "sigstop:dispatcher": { role: "dispatcher", signal: "SIGSTOP" },
  "sigstop:worker": { role: "worker", signal: "SIGSTOP" }
}

const providerModeOf: Partial<Record<FaultKind, ProviderMode>> = {
  "provider:500": "error500",
  "provider:429": "rateLimited",
  "provider:slow": "slow",
  "provider:malformed": "malformed"
}

/**
 * Runs `plan` against the fleet. `sql` is an admin connection that is NOT on the scratch
 * database, so `KILL CONNECTION` of the scratch database's sessions never kills the run's own.
 */
export const injectFaults = (options: {
  readonly plan: ReadonlyArray<PlannedFault>
  readonly fleet: Fleet
  readonly redis: ChaosRedis
  readonly provider: ChaosProvider
  readonly database: string
  readonly timing: FaultTiming
  readonly startedAtMs: number
  /** How long a process fault may wait for its role to have a spare process. */
  readonly eligibleWithin: Duration.Duration
  /** A fault not started by then (since `startedAtMs`) is skipped, so a slow fleet cannot stretch the run. */
  readonly lastStartMs: number
}): Effect.Effect<
  { readonly report: InjectionReport; readonly monitorsDone: Effect.Effect<void> },
  never,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const injected: Array<InjectedFault> = []
    const skipped: Array<{ kind: FaultKind; reason: string }> = []
    const problems: Array<string> = []
    const recoveries: Array<Recovery> = []
    const crashedJobs = new Set<string>()
    const frozenJobs = new Set<string>()
    const handedOffJobs = new Set<string>()
    const redisPauses: Array<{ fromMs: number; toMs: number }> = []
    const apiOutages: Array<{ apiUrl: string; fromMs: number; toMs: number }> = []
    let killedConnections = 0
    // The recovery monitors run on into the drain.
    const monitors = yield* FiberSet.make()
    const table = `\`${options.database}\`.ai_job`
    const sinceStart = Effect.map(Clock.currentTimeMillis, (now) => now - options.startedAtMs)

    const note = (what: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.catchAllCause((cause) =>
        Effect.sync(() => void problems.push(`${what}: ${cause.toString().split("\n")[0]}`))
      ))

    const heldBy = (workerId: string) =>
      sql.unsafe(`SELECT id FROM ${table} WHERE locked_by = ? AND lifecycle_status = 'running'`, [workerId]).pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(HeldJob))),
        Effect.map(Arr.map((row) =>
          row.id
        )),
        Effect.orElseSucceed((): ReadonlyArray<string> => [])
      )

    /** Polls the jobs a lost worker held until each has another owner or has ended. */
    const watchRecovery = (kind: Recovery["kind"], workerId: string, jobIds: ReadonlyArray<string>, t0: number) =>
      Effect.gen(function*() {
        const pending = new Set(jobIds)
        const deadline = t0 + 120_000
        while (pending.size > 0 && (yield* Clock.currentTimeMillis) < deadline) {
          yield* Effect.sleep(Duration.millis(250))
          const rows = yield* sql.unsafe(
            `SELECT id, locked_by, lifecycle_status FROM ${table} WHERE id IN (${
              [...pending].map(() => "?").join(", ")
            })`,
            [...pending]
          ).pipe(
            Effect.flatMap(Schema.decodeUnknown(Schema.Array(JobOwner))),
            Effect.orElseSucceed((): ReadonlyArray<typeof JobOwner.Type> => [])
          )
          const now = yield* Clock.currentTimeMillis
          for (const row of rows) {
            const ended = row.lifecycleStatus === "succeeded" || row.lifecycleStatus === "failed" ||
              row.lifecycleStatus === "cancelled"
            const takenOver = row.lockedBy !== null && row.lockedBy !== workerId
            if (ended || takenOver) {
              pending.delete(row.id)
              recoveries.push({ kind, jobId: row.id, ms: now - t0, how: takenOver ? "taken over" : "ended" })
            }
          }
        }
        for (const jobId of pending) recoveries.push({ kind, jobId, ms: undefined, how: "never" })
      })

    const serving = (role: Role) =>
      Effect.map(options.fleet.slots, (slots) => slots.filter((s) => s.role === role && s.state === "running"))

    /**
     * A serving process of `role` while another one serves too; none if that never happens in
     * time. Of the workers, the one holding the most jobs: a fault there tests the most.
     */
    const targetOf = (role: Role, pick: number) =>
      Effect.gen(function*() {
        const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(options.eligibleWithin)
        while (true) {
          const up = yield* serving(role)
          if (up.length >= 2) {
            if (role !== "worker") return up[pick % up.length]
            const held = yield* Effect.forEach(up, (slot) =>
              Effect.map(heldBy(slot.workerId ?? ""), (jobs) => jobs.length))
            const most = Math.max(...held)
            const busiest = up.filter((_, i) =>
              held[i] === most
            )
            return busiest[pick % busiest.length]
          }
          if ((yield* Clock.currentTimeMillis) > until) return undefined
          yield* Effect.sleep(Duration.millis(250))
        }
      })

    const processFault = (kind: FaultKind, role: Role, signal: "SIGKILL" | "SIGTERM" | "SIGSTOP", pick: number) =>
      Effect.gen(function*() {
        const slot = yield* targetOf(role, pick)
        if (slot === undefined) {
          skipped.push({ kind, reason: `no spare ${role} within ${Duration.format(options.eligibleWithin)}` })
          return
        }
        const recoveryKind: Recovery["kind"] = signal === "SIGKILL"
          ? "kill9"
          : signal === "SIGTERM"
          ? "sigterm"
          : "sigstop"
        // A stopping worker hands its jobs back at once: what it held is read before the signal.
        // A killed or frozen one holds its rows as they are: read after, so none ended in between.
        const before = recoveryKind === "sigterm" && slot.workerId !== undefined ? yield* heldBy(slot.workerId) : []
        const t0 = yield* Clock.currentTimeMillis
        yield* options.fleet.signal(slot.name, signal)
        yield* options.fleet.setState(slot.name, signal === "SIGSTOP" ? "stopped" : "down")
        injected.push({ kind, atMs: t0 - options.startedAtMs, target: slot.child?.name ?? slot.name })
        const held = recoveryKind === "sigterm" || slot.workerId === undefined ? before : yield* heldBy(slot.workerId)
        for (const jobId of held) (recoveryKind === "sigterm" ? handedOffJobs : crashedJobs).add(jobId)
        if (recoveryKind === "sigstop") { for (const jobId of held) frozenJobs.add(jobId) }
        if (slot.workerId !== undefined && held.length > 0) {
          yield* FiberSet.run(monitors, watchRecovery(recoveryKind, slot.workerId, held, t0))
        }
        if (signal === "SIGSTOP") {
          yield* Effect.sleep(Duration.millis(options.timing.stopMs[role]))
          yield* options.fleet.signal(slot.name, "SIGCONT")
          yield* options.fleet.setState(slot.name, "running")
        } else {
          // A stopping process gets its shutdown grace; a killed one is gone at once.
          yield* options.fleet.awaitDown(slot.name, Duration.seconds(signal === "SIGTERM" ? 20 : 5))
          yield* options.fleet.start(slot.name).pipe(note(`restart ${slot.name}`))
        }
        if (role === "api") {
          apiOutages.push({ apiUrl: `http://127.0.0.1:${slot.port}`, fromMs: t0, toMs: yield* Clock.currentTimeMillis })
        }
      })

    /**
     * A deploy: SIGTERM to every serving worker in turn, `rollingStepMs` apart, each started
     * again once it exited; a step shorter than a restart hands jobs on to workers that are
     * stopping themselves. What each held is watched until another worker has it.
     */
    const rollingRestart = Effect.gen(function*() {
      const up = yield* serving("worker")
      if (up.length < 2) {
        skipped.push({ kind: "rolling-restart:worker", reason: `${up.length} worker(s) serving` })
        return
      }
      const t0 = yield* Clock.currentTimeMillis
      injected.push({
        kind: "rolling-restart:worker",
        atMs: t0 - options.startedAtMs,
        target: up.map((slot) => slot.child?.name ?? slot.name).join(" ")
      })
      const restarts = yield* FiberSet.make()
      for (const [index, slot] of up.entries()) {
        if (index > 0) yield* Effect.sleep(Duration.millis(options.timing.rollingStepMs))
        const held = slot.workerId === undefined ? [] : yield* heldBy(slot.workerId)
        for (const jobId of held) handedOffJobs.add(jobId)
        const stoppedAt = yield* Clock.currentTimeMillis
        yield* options.fleet.signal(slot.name, "SIGTERM")
        yield* options.fleet.setState(slot.name, "down")
        if (slot.workerId !== undefined && held.length > 0) {
          yield* FiberSet.run(monitors, watchRecovery("rolling", slot.workerId, held, stoppedAt))
        }
        yield* FiberSet.run(
          restarts,
          Effect.zipRight(
            options.fleet.awaitDown(slot.name, Duration.seconds(20)),
            options.fleet.start(slot.name).pipe(note(`restart ${slot.name}`))
          )
        )
      }
      yield* FiberSet.awaitEmpty(restarts)
    })

    const killConnections = Effect.gen(function*() {
      const ids = yield* sql.unsafe("SELECT id FROM information_schema.PROCESSLIST WHERE db = ?", [options.database])
        .pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(ConnectionId)))
        )
      for (const { id } of ids) {
        // The id is a decoded integer; KILL takes no placeholder.
        yield* sql.unsafe(`KILL CONNECTION ${id}`).pipe(Effect.ignore)
      }
      killedConnections += ids.length
      return ids.length
    })

    const apply = (fault: PlannedFault) =>
      Effect.gen(function*() {
        const signalled = processFaults[fault.kind]
        if (signalled !== undefined) {
          return yield* processFault(fault.kind, signalled.role, signalled.signal, fault.pick)
        }
        const at = yield* sinceStart
        const mode = providerModeOf[fault.kind]
        if (mode !== undefined) {
          injected.push({ kind: fault.kind, atMs: at, target: `provider ${mode}` })
          yield* options.provider.setMode(mode)
          yield* Effect.sleep(Duration.millis(options.timing.providerWindowMs))
          yield* options.provider.setMode("ok")
        } else if (fault.kind === "mysql:kill-connections") {
          injected.push({ kind: fault.kind, atMs: at, target: `${yield* killConnections} connections` })
        } else if (fault.kind === "redis:restart") {
          yield* options.redis.restart
          injected.push({ kind: fault.kind, atMs: at, target: "redis" })
        } else if (fault.kind === "redis:pause") {
          const fromMs = yield* Clock.currentTimeMillis
          yield* options.redis.pause(options.timing.redisPauseMs)
          redisPauses.push({ fromMs, toMs: fromMs + options.timing.redisPauseMs })
          injected.push({ kind: fault.kind, atMs: at, target: "redis" })
          yield* Effect.sleep(Duration.millis(options.timing.redisPauseMs))
        } else if (fault.kind === "rolling-restart:worker") {
          yield* rollingRestart
        }
      }).pipe(note(fault.kind))

    // One lane per role, one for the provider, one for the stores: a lane carries out its faults
    // in order, each at its time or as soon as the previous one is over (a restart included), so
    // a slow restart delays only faults of its own kind and provider windows never overlap.
    const laneOf = (kind: FaultKind) =>
      kind === "rolling-restart:worker"
        ? "worker"
        : processFaults[kind]?.role ?? (providerModeOf[kind] !== undefined ? "provider" : "stores")
    const lanes = Arr.groupBy(options.plan, (fault) => laneOf(fault.kind))
    yield* Effect.forEach(
      Object.values(lanes),
      (lane) =>
        Effect.forEach(lane, (fault) =>
          Effect.gen(function*() {
            const now = yield* sinceStart
            if (now > options.lastStartMs) {
              skipped.push({
                kind: fault.kind,
                reason: `its lane was still busy at +${Math.round(options.lastStartMs / 1000)} s`
              })
              return
            }
            if (fault.atMs > now) yield* Effect.sleep(Duration.millis(fault.atMs - now))
            yield* apply(fault)
          }), { discard: true }),
      { concurrency: "unbounded", discard: true }
    )
    yield* options.provider.setMode("ok")
    const report: InjectionReport = {
      injected,
      skipped,
      problems,
      recoveries,
      get killedConnections() {
        return killedConnections
      },
      crashedJobs,
      frozenJobs,
      handedOffJobs,
      redisPauses,
      apiOutages
    }
    return { report, monitorsDone: FiberSet.awaitEmpty(monitors) }
  })
