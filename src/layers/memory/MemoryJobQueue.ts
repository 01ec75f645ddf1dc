import {
  Cause,
  Clock,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  HashMap,
  Layer,
  Option,
  Order,
  type Scope,
  STM,
  TPriorityQueue,
  TRef
} from "effect"
import { QueueSettings } from "../../config/QueueSettings.js"
import type { QueueName } from "../../domain/QueueName.js"
import {
  type ConsumeOptions,
  decodeQueuePayload,
  encodeQueuePayload,
  isStoppingHandOff,
  type JobDelivery,
  JobQueue,
  type JobQueueAddOutcome,
  type JobQueueAddRequest,
  JobQueueUnavailable,
  payloadErrorPaths,
  type QueueJobState,
  queuePriorityFor
} from "../../services/JobQueue.js"

type EntryState = "waiting" | "active" | "delayed"

interface Entry {
  readonly queueJobId: string
  /** What would be stored in Redis: the encoded payload (or, for fault injection, anything). */
  readonly data: unknown
  /** BullMQ's scale (1 = highest). */
  readonly priority: number
  /** FIFO among equal priorities. */
  readonly seq: number
  readonly attemptsMade: number
  readonly maxAttempts: number
  readonly state: EntryState
  /** When a consumer took it (the store's clock), while active. */
  readonly activeSinceMs?: number
}

interface Ready {
  readonly queueJobId: string
  readonly priority: number
  readonly seq: number
}

const readyOrder: Order.Order<Ready> = Order.combine(
  Order.mapInput(Order.number, (ready: Ready) => ready.priority),
  Order.mapInput(Order.number, (ready: Ready) => ready.seq)
)

interface QueueState {
  readonly entries: TRef.TRef<HashMap.HashMap<string, Entry>>
  readonly ready: TPriorityQueue.TPriorityQueue<Ready>
}

/** Test and simulation controls of the in-memory queue. */
export class MemoryJobQueueControl extends Context.Tag("ai-job-engine/MemoryJobQueueControl")<
  MemoryJobQueueControl,
  {
    /** While set, `add` and `counts` fail with `JobQueueUnavailable` and nothing is delivered. */
    readonly setUnreachable: (unreachable: boolean) => Effect.Effect<void>
    /** Puts arbitrary data on a queue, bypassing the payload Schema (a poison message). */
    readonly addRaw: (queueName: QueueName, queueJobId: string, data: unknown) => Effect.Effect<void>
    /** Every job id currently on the queue, whatever its state. */
    readonly jobIds: (queueName: QueueName) => Effect.Effect<ReadonlyArray<string>>
  }
>() {}

/**
 * The in-memory twin of the BullMQ queue, on STM: the same dedupe (an id is refused while its
 * job is waiting, delayed or active; finished jobs are removed), priority order, per-consumer
 * concurrency, attempts with exponential backoff, hand-backs by a stopping consumer that cost
 * no attempt, and a switchable "Redis unreachable" fault.
 * All waiting goes through Effect's Clock, so TestClock drives backoffs and delays.
 */
export const makeMemoryJobQueue = Effect.gen(function*() {
  const settings = yield* QueueSettings
  const layerScope = yield* Effect.scope
  const unreachable = yield* TRef.make(false)
  const seq = yield* TRef.make(0)
  const makeState = STM.all({
    entries: TRef.make(HashMap.empty<string, Entry>()),
    ready: TPriorityQueue.empty<Ready>(readyOrder)
  })
  const states: Record<QueueName, QueueState> = {
    "ai-interactive": yield* STM.commit(makeState),
    "ai-background": yield* STM.commit(makeState)
  }

  const refuseWhenUnreachable = (operation: string) =>
    STM.flatMap(
      TRef.get(unreachable),
      (down) =>
        down
          ? STM.fail(new JobQueueUnavailable({ operation, message: "queue unreachable (injected fault)" }))
          : STM.void
    )

  const makeReady = (state: QueueState, entry: Entry) =>
    STM.zipRight(
      TRef.update(state.entries, HashMap.set<string, Entry>(entry.queueJobId, { ...entry, state: "waiting" })),
      TPriorityQueue.offer(state.ready, { queueJobId: entry.queueJobId, priority: entry.priority, seq: entry.seq })
    )

  /** After `delayMs`, a still-delayed entry becomes waiting. Runs in the layer's scope. */
  const releaseLater = (queueName: QueueName, queueJobId: string, delayMs: number) =>
    Effect.sleep(Duration.millis(delayMs)).pipe(
      Effect.zipRight(
        STM.commit(
          STM.gen(function*() {
            const state = states[queueName]
            const entry = HashMap.get(yield* TRef.get(state.entries), queueJobId)
            if (Option.isSome(entry) && entry.value.state === "delayed") yield* makeReady(state, entry.value)
          })
        )
      ),
      Effect.forkIn(layerScope),
      Effect.asVoid
    )

  const insert = (queueName: QueueName, queueJobId: string, data: unknown, priority: number, delayMs: number) =>
    STM.gen(function*() {
      const state = states[queueName]
      if (HashMap.has(yield* TRef.get(state.entries), queueJobId)) return "duplicate" as const
      const next = yield* TRef.updateAndGet(seq, (n) => n + 1)
      const entry: Entry = {
        queueJobId,
        data,
        priority,
        seq: next,
        attemptsMade: 0,
        maxAttempts: settings.queues[queueName].attempts,
        state: delayMs > 0 ? "delayed" : "waiting"
      }
      if (delayMs > 0) yield* TRef.update(state.entries, HashMap.set(queueJobId, entry))
      else yield* makeReady(state, entry)
      return "added" as const
    })

  const add = (request: JobQueueAddRequest): Effect.Effect<JobQueueAddOutcome, JobQueueUnavailable> =>
    Effect.gen(function*() {
      const delayMs = Math.max(0, Math.round(Duration.toMillis(request.delay ?? Duration.zero)))
      const queueJobId = request.payload.dedupeKey
      const outcome = yield* STM.commit(
        STM.zipRight(
          refuseWhenUnreachable("add"),
          insert(
            request.queueName,
            queueJobId,
            encodeQueuePayload(request.payload),
            queuePriorityFor(request.priority),
            delayMs
          )
        )
      )
      if (outcome === "added" && delayMs > 0) yield* releaseLater(request.queueName, queueJobId, delayMs)
      return outcome
    })

  // All or nothing here (one STM transaction); callers may only count on what `addBulk` promises.
  const addBulk = (requests: ReadonlyArray<JobQueueAddRequest>): Effect.Effect<void, JobQueueUnavailable> =>
    Effect.gen(function*() {
      const entries = requests.map((request) => ({
        request,
        delayMs: Math.max(0, Math.round(Duration.toMillis(request.delay ?? Duration.zero)))
      }))
      const outcomes = yield* STM.commit(
        STM.zipRight(
          refuseWhenUnreachable("addBulk"),
          STM.forEach(entries, ({ delayMs, request }) =>
            STM.map(
              insert(
                request.queueName,
                request.payload.dedupeKey,
                encodeQueuePayload(request.payload),
                queuePriorityFor(request.priority),
                delayMs
              ),
              (outcome) => ({ outcome, delayMs, request })
            ))
        )
      )
      yield* Effect.forEach(outcomes, ({ delayMs, outcome, request }) =>
        outcome === "added" && delayMs > 0
          ? releaseLater(request.queueName, request.payload.dedupeKey, delayMs)
          : Effect.void, { discard: true })
    })

  const contains = (queueName: QueueName, queueJobId: string) =>
    STM.commit(
      STM.zipRight(
        refuseWhenUnreachable("contains"),
        STM.map(TRef.get(states[queueName].entries), HashMap.has(queueJobId))
      )
    )

  const counts = (queueName: QueueName) =>
    STM.commit(
      STM.zipRight(
        refuseWhenUnreachable("counts"),
        STM.map(TRef.get(states[queueName].entries), (entries) => {
          let waiting = 0
          let active = 0
          let delayed = 0
          for (const entry of HashMap.values(entries)) {
            if (entry.state === "waiting") waiting++
            else if (entry.state === "active") active++
            else delayed++
          }
          return { waiting, active, delayed }
        })
      )
    )

  /** Every entry still held is waiting, delayed or active: finished ones are removed. */
  const state = (queueName: QueueName, queueJobId: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      STM.commit(
        STM.zipRight(
          refuseWhenUnreachable("state"),
          STM.map(TRef.get(states[queueName].entries), (entries): QueueJobState =>
            Option.match(HashMap.get(entries, queueJobId), {
              onNone: () => ({ _tag: "Gone" }),
              onSome: (entry) =>
                entry.state === "active"
                  ? { _tag: "Active", activeSinceMs: entry.activeSinceMs ?? now }
                  : { _tag: "Waiting" }
            }))
        )
      ))

  const remove = (queueName: QueueName, queueJobId: string) =>
    STM.commit(TRef.update(states[queueName].entries, HashMap.remove(queueJobId)))

  /** A failed delivery: delayed with exponential backoff while attempts remain, else removed. */
  const retryOrDrop = (queueName: QueueName, entry: Entry) =>
    Effect.gen(function*() {
      if (entry.attemptsMade >= entry.maxAttempts) return yield* remove(queueName, entry.queueJobId)
      const delayMs = Duration.toMillis(settings.queues[queueName].backoffDelay) * 2 ** (entry.attemptsMade - 1)
      yield* STM.commit(
        TRef.update(
          states[queueName].entries,
          HashMap.set<string, Entry>(entry.queueJobId, { ...entry, state: "delayed" })
        )
      )
      yield* releaseLater(queueName, entry.queueJobId, delayMs)
    })

  const consume = <E, R>(
    queueName: QueueName,
    handler: (delivery: JobDelivery) => Effect.Effect<void, E, R>,
    options: ConsumeOptions = {}
  ): Effect.Effect<void, JobQueueUnavailable, Scope.Scope | R> =>
    Effect.gen(function*() {
      const state = states[queueName]
      const stopping = yield* TRef.make(false)
      const concurrency = Math.max(1, options.concurrency ?? settings.queues[queueName].concurrency)

      /** The next entry, marked active; `None` once the consumer is stopping. */
      const take: Effect.Effect<Option.Option<Entry>> = STM.commit(
        STM.gen(function*() {
          if (yield* TRef.get(stopping)) return Option.none()
          if (yield* TRef.get(unreachable)) return yield* STM.retry
          const ready = yield* TPriorityQueue.take(state.ready)
          const entries = yield* TRef.get(state.entries)
          const entry = HashMap.get(entries, ready.queueJobId)
          if (Option.isNone(entry) || entry.value.state !== "waiting") return Option.none<Entry>()
          const active: Entry = { ...entry.value, state: "active", attemptsMade: entry.value.attemptsMade + 1 }
          yield* TRef.set(state.entries, HashMap.set(entries, ready.queueJobId, active))
          return Option.some(active)
        })
      )

      const deliver = (entry: Entry) =>
        Effect.gen(function*() {
          const decoded = yield* Effect.either(decodeQueuePayload(entry.data))
          if (decoded._tag === "Left") {
            yield* Effect.logError("Queue payload does not decode; job dropped, its row is left for the reaper").pipe(
              Effect.annotateLogs({
                queue: queueName,
                queueJobId: entry.queueJobId,
                invalidFields: payloadErrorPaths(decoded.left)
              })
            )
            return yield* remove(queueName, entry.queueJobId)
          }
          const takenAt = yield* Clock.currentTimeMillis
          yield* STM.commit(
            TRef.update(state.entries, (entries) =>
              HashMap.modify(
                entries,
                entry.queueJobId,
                (current) => current.state === "active" ? { ...current, activeSinceMs: takenAt } : current
              ))
          )
          const controller = new AbortController()
          const delivery: JobDelivery = {
            queueName,
            queueJobId: entry.queueJobId,
            payload: decoded.right,
            attempt: entry.attemptsMade,
            maxAttempts: entry.maxAttempts,
            signal: controller.signal
          }
          const exit = yield* handler(delivery).pipe(
            Effect.onInterrupt(() =>
              Effect.sync(() => controller.abort()).pipe(
                // Like a stalled BullMQ job: back to waiting, the attempt already counted.
                Effect.zipRight(STM.commit(makeReady(state, entry)))
              )
            ),
            Effect.exit
          )
          if (Exit.isSuccess(exit)) return yield* remove(queueName, entry.queueJobId)
          if (isStoppingHandOff(exit.cause)) {
            // Back to waiting at once, its attempt not counted; this consumer takes no more.
            yield* STM.commit(
              STM.zipRight(
                TRef.set(stopping, true),
                makeReady(state, { ...entry, attemptsMade: entry.attemptsMade - 1 })
              )
            )
            return yield* Effect.logInfo("Queue delivery handed back by a stopping consumer; waiting again for another")
              .pipe(
                Effect.annotateLogs({ queue: queueName, queueJobId: entry.queueJobId, jobId: decoded.right.jobId })
              )
          }
          yield* Effect.logWarning("Queue delivery failed; the queue retries it while attempts remain").pipe(
            Effect.annotateLogs({
              queue: queueName,
              queueJobId: entry.queueJobId,
              jobId: decoded.right.jobId,
              attempt: entry.attemptsMade,
              reason: Cause.isFailType(exit.cause) ? "failure" : "defect"
            })
          )
          yield* retryOrDrop(queueName, entry)
        })

      const loop: Effect.Effect<void, never, R> = Effect.gen(function*() {
        while (true) {
          const next = yield* take
          if (Option.isNone(next)) {
            if (yield* STM.commit(TRef.get(stopping))) return
            continue
          }
          yield* deliver(next.value)
        }
      })

      const workers = yield* Effect.forEach(Array.from({ length: concurrency }), () => Effect.forkDaemon(loop))
      yield* Effect.addFinalizer(() =>
        Effect.gen(function*() {
          yield* STM.commit(TRef.set(stopping, true))
          // A finalizer runs uninterruptibly: without `interruptible` the grace could not cut the join short.
          const finished = yield* Fiber.joinAll(workers).pipe(
            Effect.interruptible,
            Effect.timeoutOption(settings.shutdownGrace)
          )
          if (Option.isNone(finished)) yield* Fiber.interruptAll(workers)
        })
      )
    })

  const control = MemoryJobQueueControl.of({
    setUnreachable: (down) => STM.commit(TRef.set(unreachable, down)),
    addRaw: (queueName, queueJobId, data) =>
      STM.commit(insert(queueName, queueJobId, data, queuePriorityFor(50), 0)).pipe(Effect.asVoid),
    jobIds: (queueName) =>
      STM.commit(TRef.get(states[queueName].entries)).pipe(Effect.map((entries) => [...HashMap.keys(entries)]))
  })

  return Context.make(JobQueue, JobQueue.of({ add, addBulk, consume, counts, contains, state })).pipe(
    Context.add(MemoryJobQueueControl, control)
  )
})

/** The in-memory JobQueue and its control; needs `QueueSettings` (`QueueSettings.make()` in tests). */
export const MemoryJobQueueLive = Layer.scopedContext(makeMemoryJobQueue)
