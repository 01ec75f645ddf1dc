import { Cause, Deferred, Duration, Effect, Either, Exit, FiberRef, Option, Random, Scope, Stream } from "effect"
import { type ExecutionError, ProviderError } from "../domain/ExecutionError.js"
import { PersistenceError } from "../domain/PersistenceError.js"
import type { MemoryDatabase } from "../layers/memory/MemoryDatabase.js"
import type { MemoryJobQueueControl } from "../layers/memory/MemoryJobQueue.js"
import type { AiGateway, GatewayError, GenerateRequest, GenerateResult } from "../services/AiGateway.js"
import type { CancelSignal } from "../services/CancelSignal.js"
import {
  encodeQueuePayload,
  type JobDelivery,
  type JobQueue,
  JobQueueUnavailable,
  queueJobIdFor
} from "../services/JobQueue.js"
import type { ProviderCall } from "./callChecks.js"
import { currentAdmission } from "./failoverChecks.js"
import type { CrashPoint, DeliveryFaults } from "./faults.js"
import { activeRunKey, activeRuns, currentRun, currentWriter, newRunRecord } from "./invariants.js"

/** Where an armed process dies: a worker's crash point, or a dispatcher between claim and add. */
export type ArmedPoint = CrashPoint | "after-claim"

/**
 * One simulated OS process (a worker or a dispatcher) inside the simulation's single Node
 * process. Killing it (`crash`) stops its fibers where they are and refuses every write it
 * still attempts, like `kill -9` with the connection cut; pausing it freezes its database and
 * provider traffic, like a GC pause or a stopped VM.
 */
export interface SimProcess {
  readonly id: string
  readonly slot: number
  readonly kind: "worker" | "dispatcher"
  /** Closed by the crash; the process's layers and fibers live in it. */
  readonly scope: Scope.CloseableScope
  readonly crashed: Deferred.Deferred<void>
  readonly isCrashed: () => boolean
  /** Open while running; closed while paused. */
  readonly gate: Effect.Latch
  readonly isPaused: () => boolean
  readonly pause: Effect.Effect<void>
  readonly resume: Effect.Effect<void>
  readonly arm: (point: ArmedPoint | null) => void
  readonly armed: () => ArmedPoint | null
  /** Freezes the worker at its next provider call; `onPause` hears which job it holds. */
  readonly armPause: (onPause: ((jobId: string) => Effect.Effect<void>) | null) => void
  readonly pauseArmed: () => ((jobId: string) => Effect.Effect<void>) | null
  /**
   * Calls `onPause` with the job as the worker's next run begins PROJECT's transaction; the hook
   * may freeze the process (`pause`), and the transaction then waits for the gate.
   */
  readonly armProjectPause: (onPause: ((jobId: string) => Effect.Effect<void>) | null) => void
  readonly projectPauseArmed: () => ((jobId: string) => Effect.Effect<void>) | null
  /** Kills the process now (idempotent). */
  readonly crash: (where: string) => Effect.Effect<void>
  /** The consumer scopes of a worker, closed at once on a crash so nothing new is taken. */
  readonly consumerScopes: Array<Scope.CloseableScope>
}

export interface ProcessHooks {
  /** Called once, when the process dies (the world records it and schedules the restart). */
  readonly onCrash: (process: SimProcess, where: string) => Effect.Effect<void>
}

export const makeProcess = (options: {
  readonly id: string
  readonly slot: number
  readonly kind: "worker" | "dispatcher"
  readonly hooks: ProcessHooks
}) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const crashed = yield* Deferred.make<void>()
    const gate = yield* Effect.makeLatch(true)
    let dead = false
    let paused = false
    let armedPoint: ArmedPoint | null = null
    let pauseHook: ((jobId: string) => Effect.Effect<void>) | null = null
    let projectPauseHook: ((jobId: string) => Effect.Effect<void>) | null = null
    const consumerScopes: Array<Scope.CloseableScope> = []

    const teardown = Effect.gen(function*() {
      // Consumers first and all at once: a dead process takes no new delivery.
      yield* Effect.forEach(consumerScopes, (consumer) => Scope.close(consumer, Exit.void), {
        concurrency: "unbounded",
        discard: true
      })
      yield* Scope.close(scope, Exit.void)
    })

    const self: SimProcess = {
      id: options.id,
      slot: options.slot,
      kind: options.kind,
      scope,
      crashed,
      isCrashed: () => dead,
      gate,
      isPaused: () => paused,
      pause: Effect.suspend(() => {
        paused = true
        return gate.close
      }),
      resume: Effect.suspend(() => {
        paused = false
        return gate.open
      }),
      arm: (point) => {
        armedPoint = point
      },
      armed: () => armedPoint,
      armPause: (onPause) => {
        pauseHook = onPause
      },
      pauseArmed: () => pauseHook,
      armProjectPause: (onPause) => {
        projectPauseHook = onPause
      },
      projectPauseArmed: () => projectPauseHook,
      crash: (where) =>
        Effect.suspend(() => {
          if (dead) return Effect.void
          dead = true
          armedPoint = null
          return Effect.gen(function*() {
            yield* Deferred.succeed(crashed, undefined)
            // A paused process dies too: open the gate so its fibers can be interrupted cleanly.
            yield* gate.open
            yield* options.hooks.onCrash(self, where)
            yield* Effect.forkDaemon(teardown)
          })
        }),
      consumerScopes
    }
    return self
  })

/** The fiber stops here for good; the crash interrupts it (interruptible even inside `uninterruptible`). */
const stopHere: Effect.Effect<never> = Effect.interruptible(Effect.never)

const refused = (process: SimProcess, operation: string) =>
  new PersistenceError({ operation, message: `${process.id} is dead (simulated kill -9)` })

/** Dies at `point` if the process is armed for it. */
const crashAt = (process: SimProcess, point: ArmedPoint): Effect.Effect<void> =>
  Effect.suspend(() => (process.armed() === point ? Effect.zipRight(process.crash(point), stopHere) : Effect.void))

const lockOperations = new Set(["ai_job.lock", "ai_job.takeOver"])

/**
 * A process's own connection to the shared memory database: refused once the process is dead,
 * frozen while it is paused (outside transactions, so a pause never holds the database's write
 * lock), attributed to the process for the invariants, and with the labelled crash points.
 */
export const processDatabase = (shared: MemoryDatabase["Type"], process: SimProcess): MemoryDatabase["Type"] => {
  const inTransaction = FiberRef.unsafeMake(false)
  let crashAfterCommit = false

  const enter = (operation: string) =>
    Effect.gen(function*() {
      if (!(yield* FiberRef.get(inTransaction))) yield* process.gate.await
      if (process.isCrashed()) return yield* Effect.fail(refused(process, operation))
    })

  const write: MemoryDatabase["Type"]["write"] = (operation, f) =>
    Effect.gen(function*() {
      yield* enter(operation)
      if (lockOperations.has(operation)) yield* crashAt(process, "before-lock")
      if (operation === "ai_job_artifact.record") yield* crashAt(process, "inside-project")
      let changed = false
      const result = yield* shared.write(operation, (tables, now) => {
        const outcome = f(tables, now)
        if (Either.isRight(outcome) && outcome.right[1] !== tables) changed = true
        return outcome
      })
      // A dispatcher that claimed something dies before it adds anything to the queue.
      if (operation === "outbox_event.claimBatch" && changed) yield* crashAt(process, "after-claim")
      if (lockOperations.has(operation)) yield* crashAt(process, "after-lock")
      if (operation === "ai_job.markSucceeded" && process.armed() === "after-commit") crashAfterCommit = true
      return result
    }).pipe(Effect.locally(currentWriter, process.id))

  const transaction: MemoryDatabase["Type"]["transaction"] = (effect) =>
    Effect.gen(function*() {
      // What the database held when the run asked for its transaction: when its PROJECT began.
      const run = yield* FiberRef.get(currentRun)
      if (run !== undefined && run.projectSaw === undefined && !(yield* FiberRef.get(inTransaction))) {
        run.projectSaw = yield* shared.snapshot
        // Armed: the process may freeze here, its output validated and PROJECT begun, so its
        // transaction (below) waits for the gate while its lease lapses.
        const onPause = process.projectPauseArmed()
        if (onPause !== null && run.lease !== undefined) {
          process.armProjectPause(null)
          yield* onPause(run.lease.jobId)
        }
      }
      yield* enter("begin")
      const result = yield* shared.transaction(
        Effect.zipLeft(
          Effect.locally(effect, inTransaction, true),
          // The commit of a dead process never arrives.
          Effect.suspend(() => (process.isCrashed() ? Effect.fail(refused(process, "commit")) : Effect.void))
        )
      )
      if (crashAfterCommit) {
        crashAfterCommit = false
        yield* Effect.zipRight(process.crash("after-commit"), stopHere)
      }
      return result
    }).pipe(
      // A transaction that did not commit leaves nothing to crash after.
      Effect.tapErrorCause(() =>
        Effect.sync(() => {
          crashAfterCommit = false
        })
      ),
      Effect.locally(currentWriter, process.id)
    )

  return {
    ...shared,
    read: (f) => Effect.zipRight(enter("read"), shared.read(f)),
    write,
    transaction
  }
}

/** Who hears of each provider call (the monitor's checks). */
export interface CallWatch {
  readonly started: (call: ProviderCall) => void
  /** With the provider's Retry-After and the error code, when the call failed with them. */
  readonly ended: (call: ProviderCall, retryAfterMs: number | undefined, errorCode: string | undefined) => void
}

const failureIn = (exit: Exit.Exit<unknown, ExecutionError>): ExecutionError | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const retryAfterIn = (exit: Exit.Exit<unknown, ExecutionError>): number | undefined => {
  const error = failureIn(exit)
  return error instanceof ProviderError ? error.retryAfterMs : undefined
}

/** One call through the process: the pause, the crash point, the gate. */
const callThrough = (shared: AiGateway["Type"], process: SimProcess, request: GenerateRequest) =>
  Effect.gen(function*() {
    const onPause = process.pauseArmed()
    if (onPause !== null) {
      // The call goes out, then the whole process freezes before the answer is read.
      process.armPause(null)
      yield* process.pause
      yield* onPause(request.job.id)
      const answer = yield* shared.generate(request)
      yield* process.gate.await
      return answer
    }
    yield* process.gate.await
    if (process.isCrashed()) return yield* stopHere
    if (process.armed() === "mid-execute") {
      // The call goes out; the process dies while it is in flight.
      yield* Effect.fork(shared.generate(request))
      yield* Effect.sleep(yield* Random.nextIntBetween(1, 500))
      yield* process.crash("mid-execute")
      return yield* stopHere
    }
    const result = yield* shared.generate(request)
    yield* process.gate.await
    return result
  })

/** How a provider that is down answers (see the `ProviderOutage` fault). */
export interface OutageAnswer {
  readonly answerMs: number
  /** The connection is refused: nothing reaches the provider. */
  readonly refused: boolean
}

/** The providers that are down now. */
export type ProviderOutages = (provider: string) => OutageAnswer | undefined

const outageError = (sent: boolean) =>
  new ProviderError({
    code: "PROVIDER_UNAVAILABLE",
    message: sent ? "simulated outage: 503" : "simulated outage: connection refused",
    ...(sent ? {} : { sent: false })
  })

/** The provider as a call reaches it: one that is down answers with its outage and nothing else. */
const reachedDuring = (shared: AiGateway["Type"], outages: ProviderOutages): AiGateway["Type"] => ({
  ...shared,
  generate: (request) =>
    Effect.suspend(() => {
      const down = outages(request.provider)
      return down === undefined
        ? shared.generate(request)
        : Effect.zipRight(Effect.sleep(down.answerMs), Effect.fail(outageError(!down.refused)))
    })
})

/** The answer as the worker reads it: while its provider is down, whatever arrives is a 503 (a stop from outside stays one). */
const readDuring =
  (provider: string, outages: ProviderOutages) =>
  <A>(exit: Exit.Exit<A, GatewayError>): Effect.Effect<A, GatewayError> => {
    if (outages(provider) === undefined || Exit.isInterrupted(exit)) return exit
    const failure = failureIn(exit)
    return failure?._tag === "ProviderError" && failure.code === "PROVIDER_UNAVAILABLE"
      ? exit
      : Effect.fail(outageError(true))
  }

/**
 * The worker's provider calls: frozen while paused; the `mid-execute` crash point; each call's
 * start and end told to `watch`, as the provider answered; with `outages`, the providers that
 * are down answer every call sent or read meanwhile with PROVIDER_UNAVAILABLE, and each call
 * carries the moment its run asked the circuit breaker for it (`currentAdmission`). Planted
 * bugs, in the adapter, after the watch: `dropRetryAfter` loses the provider's Retry-After, so
 * the engine's schedule never sees it; `credentialRefusalAsUnavailable` reports a refused key
 * as a provider outage, which the engine retries.
 */
export const processGateway = (
  shared: AiGateway["Type"],
  process: SimProcess,
  watch: CallWatch,
  options: {
    readonly dropRetryAfter: boolean
    readonly credentialRefusalAsUnavailable: boolean
    readonly outages?: ProviderOutages | undefined
  }
): AiGateway["Type"] => {
  const watched = (
    request: GenerateRequest,
    admission: { readonly providerModel: string; readonly at: number } | undefined,
    through: Effect.Effect<GenerateResult, GatewayError>
  ) => {
    const providerModel = `${request.provider}/${request.model}`
    const call: ProviderCall = {
      jobId: request.job.id,
      jobType: request.job.type,
      leaseNo: request.job.leaseNo,
      by: process.id,
      provider: request.provider,
      providerModel,
      credential: request.credential,
      admittedAt: admission?.providerModel === providerModel ? admission.at : undefined,
      input: request.input
    }
    return Effect.suspend(() => {
      watch.started(call)
      return through
    }).pipe(
      Effect.onExit((exit) => Effect.sync(() => watch.ended(call, retryAfterIn(exit), failureIn(exit)?.code))),
      Effect.mapError((error) =>
        options.dropRetryAfter && error._tag === "ProviderError" && error.retryAfterMs !== undefined
          ? new ProviderError({ code: error.code, message: error.message })
          : options.credentialRefusalAsUnavailable && error._tag === "CredentialError"
          ? new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: error.message })
          : error
      )
    )
  }
  const { outages } = options
  return {
    generate: (request) =>
      outages === undefined
        ? watched(request, undefined, callThrough(shared, process, request))
        : Effect.flatMap(FiberRef.get(currentAdmission), (admission) =>
          watched(
            request,
            admission,
            callThrough(reachedDuring(shared, outages), process, request).pipe(
              Effect.exit,
              Effect.flatMap(readDuring(request.provider, outages))
            )
          ))
  }
}

/** A frozen process reads its cancel messages only once it runs again. */
export const processCancelSignal = (shared: CancelSignal["Type"], process: SimProcess): CancelSignal["Type"] => ({
  publish: shared.publish,
  await: (jobId) => Effect.zipRight(shared.await(jobId), process.gate.await),
  subscribe: Effect.map(shared.subscribe, Stream.tap(() => process.gate.await))
})

/**
 * The worker's queue consumers: each in a scope the crash closes at once, and each delivery
 * raced against the crash, so a dead worker neither acknowledges nor takes anything; the
 * queue takes its active deliveries back as a stalled job.
 */
export const processQueue = (shared: JobQueue["Type"], process: SimProcess): JobQueue["Type"] => ({
  ...shared,
  consume: (queueName, handler, options) =>
    Effect.gen(function*() {
      const consumerScope = yield* Scope.make()
      process.consumerScopes.push(consumerScope)
      yield* Effect.addFinalizer(() => Scope.close(consumerScope, Exit.void))
      // Each delivery has its own run record (see `RunRecord`), shared by the fibers it forks.
      const guarded = (delivery: JobDelivery) =>
        Effect.suspend(() =>
          process.isCrashed()
            ? stopHere
            : Effect.raceFirst(
              process.gate.await.pipe(
                Effect.zipRight(Effect.suspend(() => {
                  const record = newRunRecord(delivery.payload.jobId)
                  const key = activeRunKey(process.id, delivery.payload.jobId)
                  activeRuns.set(key, record)
                  return Effect.locally(handler(delivery), currentRun, record).pipe(
                    Effect.ensuring(Effect.sync(() => {
                      if (activeRuns.get(key) === record) activeRuns.delete(key)
                    }))
                  )
                })),
                Effect.zipRight(Effect.suspend(() => (process.isCrashed() ? Effect.interrupt : Effect.void)))
              ),
              Effect.zipRight(Deferred.await(process.crashed), Effect.interrupt)
            )
        )
      yield* shared.consume(queueName, guarded, options).pipe(Scope.extend(consumerScope))
    })
})

/**
 * The dispatcher's queue adds: refused once dead; while delivery faults are on, some adds are
 * delayed and some delivered twice (a second queue job for the same AiJob, as a redelivery).
 */
export const processQueueAdds = (
  shared: JobQueue["Type"],
  control: MemoryJobQueueControl["Type"],
  process: SimProcess,
  faults: () => DeliveryFaults | undefined,
  record: (what: string, jobId: string, ms: number) => void
): JobQueue["Type"] => {
  let duplicates = 0
  return {
    ...shared,
    add: (request) =>
      Effect.gen(function*() {
        if (process.isCrashed()) {
          return yield* Effect.fail(new JobQueueUnavailable({ operation: "add", message: `${process.id} is dead` }))
        }
        const active = faults()
        let delay = request.delay
        if (active !== undefined && (yield* Random.next) < active.delayRate) {
          const delayMs = yield* Random.nextIntBetween(1, active.maxDelayMs + 1)
          record("delayed", request.payload.jobId, delayMs)
          delay = Duration.millis(delayMs)
        }
        const outcome = yield* shared.add(delay === undefined ? request : { ...request, delay })
        if (active !== undefined && (yield* Random.next) < active.duplicateRate) {
          const after = yield* Random.nextIntBetween(0, active.maxDelayMs + 1)
          duplicates += 1
          const duplicateId = `${queueJobIdFor(request.payload.jobId)}-dup${duplicates}-${process.id}`
          record("duplicated", request.payload.jobId, after)
          yield* Effect.forkDaemon(
            Effect.zipRight(
              Effect.sleep(after),
              control.addRaw(request.queueName, duplicateId, encodeQueuePayload(request.payload))
            )
          )
        }
        return outcome
      })
  }
}
