import { FetchHttpClient, HttpClient } from "@effect/platform"
import { Array as Arr, Duration, Effect, Ref, Schedule, type Scope } from "effect"
import { join } from "node:path"
import { ChaosError, type Child, freePort, spawnChild } from "./process.js"

/**
 * The processes under test: APIs, dispatchers and workers, each a slot ("worker-2") whose
 * current incarnation can be killed, stopped, continued and restarted. A restarted API keeps
 * its port, so clients find it again; a restarted worker gets a new WORKER_ID, as a new pod would.
 */

export type Role = "api" | "dispatcher" | "worker"
export const roles: ReadonlyArray<Role> = ["api", "dispatcher", "worker"]

export type SlotState = "starting" | "running" | "stopped" | "down"

export interface Slot {
  readonly name: string
  readonly role: Role
  readonly port: number
  readonly incarnation: number
  readonly state: SlotState
  readonly child: Child | undefined
  /** WORKER_ID of the current incarnation (workers only). */
  readonly workerId: string | undefined
}

/** The bundles production runs (`npm run chaos` builds them first when stale). */
const entryOf: Record<Role, string> = {
  api: "dist/api.js",
  dispatcher: "dist/dispatcher.js",
  worker: "dist/worker.js"
}

const readyLine: Partial<Record<Role, RegExp>> = {
  worker: /worker started/,
  dispatcher: /Outbox dispatcher started/
}

export interface Fleet {
  readonly slots: Effect.Effect<ReadonlyArray<Slot>>
  readonly apiUrls: ReadonlyArray<string>
  /** Starts the slot's next incarnation and waits until it serves. */
  readonly start: (name: string) => Effect.Effect<void, ChaosError, Scope.Scope>
  readonly signal: (name: string, signal: NodeJS.Signals) => Effect.Effect<void>
  /** Waits for the current incarnation to exit; SIGKILL after `timeout`. */
  readonly awaitDown: (name: string, timeout: Duration.DurationInput) => Effect.Effect<void>
  readonly setState: (name: string, state: SlotState) => Effect.Effect<void>
  /** Processes that exited although nobody stopped them. */
  readonly unexpectedExits: Effect.Effect<ReadonlyArray<string>>
}

export const startFleet = (options: {
  readonly counts: Readonly<Record<Role, number>>
  readonly env: Readonly<Record<string, string>>
  readonly logDir: string
  readonly readyTimeout: Duration.DurationInput
}): Effect.Effect<Fleet, ChaosError, Scope.Scope> =>
  Effect.gen(function*() {
    const initial: Array<Slot> = []
    for (const role of roles) {
      for (let i = 1; i <= options.counts[role]; i++) {
        initial.push({
          name: `${role}-${i}`,
          role,
          port: yield* freePort,
          incarnation: 0,
          state: "down",
          child: undefined,
          workerId: undefined
        })
      }
    }
    const slots = yield* Ref.make<ReadonlyArray<Slot>>(initial)
    const update = (name: string, f: (slot: Slot) => Slot) =>
      Ref.update(slots, (all) => all.map((s) => (s.name === name ? f(s) : s)))
    const get = (name: string) =>
      Effect.flatMap(Ref.get(slots), (all) => {
        const slot = all.find((s) => s.name === name)
        return slot === undefined ? Effect.die(new Error(`no slot ${name}`)) : Effect.succeed(slot)
      })
    const http = yield* Effect.provide(HttpClient.HttpClient, FetchHttpClient.layer)

    const healthy = (port: number) =>
      http.get(`http://127.0.0.1:${port}/healthz`).pipe(
        Effect.timeout(Duration.seconds(2)),
        Effect.flatMap((
          response
        ) => (response.status === 200 ? Effect.void : Effect.fail(new ChaosError({ message: "not healthy" })))),
        Effect.scoped,
        Effect.mapError(() => new ChaosError({ message: "not healthy" }))
      )

    const start = (name: string) =>
      Effect.gen(function*() {
        const slot = yield* get(name)
        const incarnation = slot.incarnation + 1
        const workerId = slot.role === "worker" ? `chaos-${name}-${incarnation}` : undefined
        const env = {
          ...options.env,
          PORT: String(slot.port),
          ...(workerId === undefined ? {} : { WORKER_ID: workerId }),
          ...(slot.role === "dispatcher" ? { DISPATCHER_ID: `chaos-${name}-${incarnation}` } : {})
        }
        const child = yield* spawnChild(
          `${name}#${incarnation}`,
          process.execPath,
          [entryOf[slot.role]],
          env,
          join(options.logDir, `${name}.log`)
        )
        yield* update(name, (s) => ({ ...s, incarnation, child, workerId, state: "starting" }))
        const line = readyLine[slot.role]
        if (line !== undefined) {
          yield* child.waitForOutput(line, options.readyTimeout)
        } else {
          yield* healthy(slot.port).pipe(
            Effect.retry(Schedule.spaced(Duration.millis(200))),
            Effect.raceFirst(
              child.waitForOutput(/(?!)/, options.readyTimeout) // fails as soon as the child exits
            ),
            Effect.timeoutFail({
              duration: options.readyTimeout,
              onTimeout: () =>
                new ChaosError({ message: `${name}: not healthy within ${Duration.format(options.readyTimeout)}` })
            })
          )
        }
        yield* update(name, (s) => (s.child === child ? { ...s, state: "running" } : s))
      })

    const signal = (name: string, sig: NodeJS.Signals) =>
      Effect.flatMap(get(name), (slot) => (slot.child === undefined ? Effect.void : slot.child.signal(sig)))

    const awaitDown = (name: string, timeout: Duration.DurationInput) =>
      Effect.gen(function*() {
        const slot = yield* get(name)
        if (slot.child === undefined) return
        const exit = yield* slot.child.awaitExit(timeout)
        if (exit._tag === "None") {
          yield* slot.child.signal("SIGCONT")
          yield* slot.child.signal("SIGKILL")
          yield* slot.child.awaitExit(Duration.seconds(10))
        }
        yield* update(name, (s) => ({ ...s, state: "down" }))
      })

    yield* Effect.forEach(initial, (slot) => start(slot.name), { concurrency: "unbounded", discard: true })

    return {
      slots: Ref.get(slots),
      apiUrls: initial.filter((s) => s.role === "api").map((s) => `http://127.0.0.1:${s.port}`),
      start,
      signal,
      awaitDown,
      setState: (name, state) => update(name, (s) => ({ ...s, state })),
      unexpectedExits: Effect.flatMap(Ref.get(slots), (all) =>
        Effect.map(
          Effect.forEach(all, (slot) =>
            slot.child === undefined || slot.state === "down"
              ? Effect.succeed<ReadonlyArray<string>>([])
              : Effect.map(
                slot.child.exited,
                (gone): ReadonlyArray<string> => (gone ? [slot.child?.name ?? slot.name] : [])
              )),
          Arr.flatten
        ))
    } satisfies Fleet
  })
