import { Clock, Data, Deferred, Duration, Effect, Exit, Option, Queue, Schedule, type Scope } from "effect"
import type { ProviderLimit, ProviderLimits } from "../config/ProviderLimitsConfig.js"
import { newId } from "../domain/Ids.js"
import type {
  CapacityOutcome,
  CapacityPermit,
  CapacityPriority,
  CapacityRequest,
  CapacityState
} from "./ProviderCapacity.js"
import { capacityKeyOf, CapacityWaitExceeded, ProviderCapacity } from "./ProviderCapacity.js"

/**
 * The part of the provider limiter both backings share: each worker's waiting room (interactive
 * first, round-robin by user) in front of a shared `CapacityStore` (Redis or memory) that counts
 * the windows, the permits in flight, the adaptive limit, the pauses and the workers that have
 * interactive calls waiting.
 */

/** The window of `rpm` and `tpm`: sliding, so no 60 s span ever sees more than the limit. */
export const capacityWindowMs = 60_000
/**
 * Pacing: no span of this length grants more than its share of `rpm` (at least one). A bare
 * sliding window lets a minute's quota go in its first seconds and replays that burst every
 * minute; an interactive call arriving in the gap waited for the rest of the minute.
 */
export const capacityPaceMs = 1_000

export const paceLimitOf = (rpm: number) => Math.max(1, Math.ceil((rpm * capacityPaceMs) / capacityWindowMs))

export const aimdIncrease = 1
export const aimdDecreaseFactor = 0.5
/** One decrease per this long: a burst of 429s from one overload halves the limit once, not to the floor. */
export const aimdDecreaseCooldownMs = 1_000
/**
 * How often a worker blocked only by another worker (a slot held elsewhere, another worker's
 * interactive call) asks again: releases in this worker wake its waiters at once.
 */
export const capacityPollMs = 50
/** A worker's "interactive calls waiting" mark outlives its next attempt by this much. */
export const interactiveMarkGraceMs = 2_000
/** The longest pause a store keeps, whatever it is asked: no key outlives a day of silence. */
export const maxPauseMs = 24 * 60 * 60 * 1000
/** A room with no waiter and no permit for this long is dropped (one per model and user key in use). */
export const idleRoomTimeout = Duration.minutes(1)

export interface StoreLimits {
  readonly rpm: number | undefined
  readonly tpm: number | undefined
  readonly ceiling: number | undefined
  readonly floor: number
}

export const storeLimitsOf = (limit: ProviderLimit | undefined): StoreLimits => ({
  rpm: limit?.rpm,
  tpm: limit?.tpm,
  ceiling: limit?.concurrency,
  floor: limit?.concurrency === undefined ? 1 : Math.min(limit.minConcurrency ?? 1, limit.concurrency)
})

export type StoreOutcome = "success" | "overload" | "neutral" | "unsent"

export interface TryAcquireInput {
  readonly providerModel: string
  readonly permitId: string
  readonly tokens: number
  readonly priority: CapacityPriority
  /** The worker asking; its interactive mark is set or cleared by this call. */
  readonly workerId: string
  /** This worker's interactive waiters, the one asking included. */
  readonly interactiveWaiters: number
  readonly limits: StoreLimits
  /** How long the permit stays counted unless refreshed. */
  readonly lease: Duration.Duration
  readonly now: number
}

export type TryAcquireResult =
  | { readonly granted: true }
  | {
    readonly granted: false
    readonly retryAt: number
    /**
     * Whether a permit released before `retryAt` may let the request through: it was refused for
     * the concurrency limit, or for the token window (a call's reported usage can lower its count).
     * A refusal for the request window, the pace, a pause or another worker's interactive call
     * is not: only the clock frees it (or a call that was never sent, whose request leaves the window).
     */
    readonly releaseMayFree: boolean
    /** Refused for a pause (the provider asked to wait until `retryAt`), which holds every waiter. */
    readonly paused?: boolean
  }

export class CapacityStoreError
  extends Data.TaggedError("CapacityStoreError")<{ readonly operation: string; readonly cause: unknown }>
{}

export interface StoreState {
  readonly inFlight: number
  readonly concurrencyLimit: number | undefined
  readonly requestsInWindow: number
  readonly tokensInWindow: number
  readonly pausedUntil: number
}

/** One atomic operation per method; `now` is the caller's Clock. */
export interface CapacityStore {
  readonly tryAcquire: (input: TryAcquireInput) => Effect.Effect<TryAcquireResult, CapacityStoreError>
  readonly release: (input: {
    readonly providerModel: string
    readonly permitId: string
    readonly outcome: StoreOutcome
    readonly totalTokens: number | undefined
    readonly limits: StoreLimits
    readonly now: number
  }) => Effect.Effect<void, CapacityStoreError>
  /** Extends the leases of permits this worker holds (a crashed worker's permits lapse). */
  readonly refresh: (
    providerModel: string,
    permitIds: ReadonlyArray<string>,
    leaseUntil: number
  ) => Effect.Effect<void, CapacityStoreError>
  readonly pause: (providerModel: string, untilMs: number, now: number) => Effect.Effect<void, CapacityStoreError>
  /** Clears the worker's interactive mark (its last interactive waiter left without a grant). */
  readonly withdraw: (providerModel: string, workerId: string) => Effect.Effect<void, CapacityStoreError>
  readonly state: (
    providerModel: string,
    limits: StoreLimits,
    now: number
  ) => Effect.Effect<StoreState, CapacityStoreError>
}

// --- The waiting room ---

interface Waiter {
  readonly permitId: string
  readonly request: CapacityRequest
  readonly granted: Deferred.Deferred<CapacityPermit, CapacityWaitExceeded>
  readonly enteredAt: number
  /** The room's paused time when this waiter came: what it has waited for pauses is the difference. */
  readonly pausedAtEntry: number
  status: "waiting" | "granted" | "left" | "refused"
}

/** One priority's waiters: users in turn, each user's waiters in arrival order. */
class Lane {
  private readonly turn: Array<string> = []
  private readonly byUser = new Map<string, Array<Waiter>>()
  size = 0

  add(waiter: Waiter) {
    const queue = this.byUser.get(waiter.request.userId)
    if (queue === undefined) {
      this.byUser.set(waiter.request.userId, [waiter])
      this.turn.push(waiter.request.userId)
    } else {
      queue.push(waiter)
    }
    this.size++
  }

  head(): Waiter | undefined {
    const user = this.turn[0]
    return user === undefined ? undefined : this.byUser.get(user)?.[0]
  }

  /** Every waiter, in no particular order. */
  all(): ReadonlyArray<Waiter> {
    return [...this.byUser.values()].flat()
  }

  /** Removes a waiter; a served user goes to the back of the turn. */
  remove(waiter: Waiter, served: boolean) {
    const user = waiter.request.userId
    const queue = this.byUser.get(user)
    const index = queue?.indexOf(waiter) ?? -1
    if (queue === undefined || index < 0) return
    queue.splice(index, 1)
    this.size--
    const position = this.turn.indexOf(user)
    if (queue.length === 0) {
      this.byUser.delete(user)
      this.turn.splice(position, 1)
    } else if (served && position === 0) {
      this.turn.push(this.turn.shift() ?? user)
    }
  }
}

interface Room {
  readonly providerModel: string
  readonly interactive: Lane
  readonly background: Lane
  readonly wake: Queue.Queue<void>
  readonly held: Set<string>
  marked: boolean
  /** What the store said of the head's last refusal: a release in this worker wakes the pump only then. */
  releaseMayFree: boolean
  /** Paused time before the current pause, and since when the current one holds the room. */
  pausedMs: number
  pausedSince: number | undefined
  /** Dropped while idle: an acquire that found it goes to a new room. */
  closed: boolean
}

/** Token counts are whole and never negative (Redis adds them with HINCRBY). */
const wholeTokens = (tokens: number) => Number.isFinite(tokens) ? Math.max(0, Math.ceil(tokens)) : 0

const laneOf = (room: Room, priority: CapacityPriority) =>
  priority === "interactive" ? room.interactive : room.background
const headOf = (room: Room) => room.interactive.head() ?? room.background.head()
const pausedSoFar = (room: Room, now: number) =>
  room.pausedMs + (room.pausedSince === undefined ? 0 : now - room.pausedSince)

/** Whether a refusal until `retryAt` would hold `waiter` past a bound its request set. */
const overBound = (room: Room, waiter: Waiter, retryAt: number, paused: boolean, now: number) => {
  const { maxPaused, maxWait } = waiter.request
  if (maxWait !== undefined && retryAt - waiter.enteredAt > Duration.toMillis(maxWait)) return true
  return paused && maxPaused !== undefined &&
    pausedSoFar(room, now) - waiter.pausedAtEntry + (retryAt - now) > Duration.toMillis(maxPaused)
}

const storeOutcomeOf = (outcome: CapacityOutcome): StoreOutcome => {
  switch (outcome._tag) {
    case "Succeeded":
      return "success"
    case "Overloaded":
      return "overload"
    case "Failed":
      return "neutral"
    case "NotSent":
      return "unsent"
  }
}

export interface ProviderCapacityOptions {
  /** How long a permit stays counted without its holder refreshing it (a crashed worker's lapse). */
  readonly lease?: Duration.Duration
  /** Names this worker's permits and interactive mark (default: a fresh id). */
  readonly workerId?: string
}

/**
 * A `ProviderCapacity` for this worker over `store`. Per `provider/model`, one pump fiber asks the
 * store for the head waiter's permit and sleeps on the Clock until the store's `retryAt` or a local
 * event (a new waiter, a release), whichever comes first. The fibers live in the layer's scope.
 */
export const makeProviderCapacity = (
  store: CapacityStore,
  limits: ProviderLimits,
  options: ProviderCapacityOptions = {}
) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const lease = options.lease ?? Duration.minutes(1)
    const workerId = options.workerId ?? `cap-${(yield* newId).slice(-12)}`
    const rooms = new Map<string, Room>()
    let permitCounter = 0

    const storeWarning = (error: CapacityStoreError) =>
      Effect.logWarning("Provider capacity store unavailable").pipe(Effect.annotateLogs({ operation: error.operation }))

    const releaseInStore = (
      key: string,
      providerModel: string,
      permitId: string,
      outcome: StoreOutcome,
      totalTokens: number | undefined
    ) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        store.release({
          providerModel: key,
          permitId,
          outcome,
          totalTokens,
          limits: storeLimitsOf(limits.limitFor(providerModel)),
          now
        })).pipe(
          Effect.catchAll(storeWarning)
        )

    const permitFor = (room: Room, waiter: Waiter, now: number): CapacityPermit => {
      let released = false
      const { estimatedTokens, providerModel } = waiter.request
      const key = capacityKeyOf(providerModel, waiter.request.credentialId)
      return {
        id: waiter.permitId,
        providerModel,
        estimatedTokens,
        paused: Duration.millis(pausedSoFar(room, now) - waiter.pausedAtEntry),
        release: (outcome) =>
          Effect.suspend(() => {
            if (released) {
              return Effect.void
            }
            released = true
            room.held.delete(waiter.permitId)
            // At saturation most refusals are the request window's; waking the pump on every
            // release then cost one refused store call per job.
            const wake = outcome._tag === "NotSent" || room.releaseMayFree
            return releaseInStore(
              key,
              room.providerModel,
              waiter.permitId,
              storeOutcomeOf(outcome),
              outcome._tag === "NotSent" || outcome.totalTokens === undefined
                ? undefined
                : wholeTokens(outcome.totalTokens)
            ).pipe(Effect.zipRight(wake ? Queue.offer(room.wake, undefined) : Effect.void), Effect.asVoid)
          }).pipe(Effect.uninterruptible)
      }
    }

    /** Fails waiters that the refusal would hold past their bounds: a pause holds all of them, any other refusal the head. */
    const refuseOverBound = (room: Room, head: Waiter, retryAt: number, paused: boolean, now: number) =>
      Effect.forEach(paused ? [...room.interactive.all(), ...room.background.all()] : [head], (waiter) => {
        if (waiter.status !== "waiting" || !overBound(room, waiter, retryAt, paused, now)) return Effect.void
        waiter.status = "refused"
        laneOf(room, waiter.request.priority).remove(waiter, false)
        return Deferred.fail(
          waiter.granted,
          new CapacityWaitExceeded({ providerModel: room.providerModel, retryAt, paused })
        )
      }, { discard: true })

    /** Idle: wait for a waiter; a room that stays empty is dropped and its pump ends (`true`). */
    const idle = (key: string, room: Room) =>
      Effect.gen(function*() {
        if (room.marked) {
          room.marked = false
          yield* store.withdraw(key, workerId).pipe(Effect.catchAll(storeWarning))
        }
        const woken = yield* Queue.take(room.wake).pipe(Effect.timeout(idleRoomTimeout), Effect.option)
        if (Option.isNone(woken) && headOf(room) === undefined && room.held.size === 0) {
          room.closed = true
          rooms.delete(key)
          return true
        }
        return false
      })

    const pump = (key: string, room: Room): Effect.Effect<void> =>
      Effect.gen(function*() {
        const head = headOf(room)
        if (head === undefined) return yield* idle(key, room)
        const now = yield* Clock.currentTimeMillis
        const storeLimits = storeLimitsOf(limits.limitFor(room.providerModel))
        const result = yield* store.tryAcquire({
          providerModel: key,
          permitId: head.permitId,
          tokens: wholeTokens(head.request.estimatedTokens),
          priority: head.request.priority,
          workerId,
          interactiveWaiters: room.interactive.size,
          limits: storeLimits,
          lease,
          now
        }).pipe(
          Effect.catchAll((error) =>
            Effect.as(storeWarning(error), { granted: false, retryAt: now + 1_000, releaseMayFree: true } as const)
          )
        )
        room.marked = room.interactive.size - (result.granted && head.request.priority === "interactive" ? 1 : 0) > 0
        room.releaseMayFree = result.granted || result.releaseMayFree
        const paused = !result.granted && "paused" in result && result.paused === true
        if (paused && room.pausedSince === undefined) room.pausedSince = now
        if (!paused && room.pausedSince !== undefined) {
          room.pausedMs += now - room.pausedSince
          room.pausedSince = undefined
        }
        if (result.granted) {
          if (head.status !== "waiting") {
            // Its fiber was interrupted while the store granted: give the permit back unused.
            yield* releaseInStore(key, room.providerModel, head.permitId, "unsent", undefined)
            return false
          }
          laneOf(room, head.request.priority).remove(head, true)
          head.status = "granted"
          room.held.add(head.permitId)
          yield* Deferred.succeed(head.granted, permitFor(room, head, now))
          return false
        }
        yield* refuseOverBound(room, head, result.retryAt, paused, now)
        // Until an instant, read after the store answered: a clock that moved meanwhile shortens the sleep.
        const delay = result.retryAt - (yield* Clock.currentTimeMillis)
        if (delay > 0 && headOf(room) === head) {
          yield* Effect.raceFirst(Effect.sleep(Duration.millis(delay)), Queue.take(room.wake))
        }
        return false
      }).pipe(Effect.repeat({ until: (closed) => closed }), Effect.asVoid)

    const refresher = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      for (const [key, room] of rooms) {
        if (room.held.size === 0) continue
        yield* store.refresh(key, [...room.held], now + Duration.toMillis(lease)).pipe(Effect.catchAll(storeWarning))
      }
    }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(Math.max(1, Math.floor(Duration.toMillis(lease) / 3))))))
    yield* Effect.forkIn(Effect.interruptible(refresher), scope)

    const roomFor = (key: string, providerModel: string) =>
      Effect.gen(function*() {
        const existing = rooms.get(key)
        if (existing !== undefined) return existing
        const wake = yield* Queue.sliding<void>(1)
        // Another first waiter may have made the room while this fiber yielded.
        const raced = rooms.get(key)
        if (raced !== undefined) return raced
        const room: Room = {
          providerModel,
          interactive: new Lane(),
          background: new Lane(),
          wake,
          held: new Set(),
          marked: false,
          releaseMayFree: true,
          pausedMs: 0,
          pausedSince: undefined,
          closed: false
        }
        rooms.set(key, room)
        // The first waiter forks the pump from its uninterruptible region: the pump must not inherit it.
        yield* Effect.forkIn(Effect.interruptible(pump(key, room)), scope)
        return room
      })

    /** The waiter joins its room's lane; a room dropped meanwhile is replaced by a new one. */
    const enter = (
      key: string,
      providerModel: string,
      make: (room: Room, now: number) => Waiter
    ): Effect.Effect<readonly [Room, Waiter]> =>
      Effect.gen(function*() {
        const room = yield* roomFor(key, providerModel)
        const now = yield* Clock.currentTimeMillis
        const entered = yield* Effect.sync(() => {
          if (room.closed) return undefined
          const waiter = make(room, now)
          laneOf(room, waiter.request.priority).add(waiter)
          return waiter
        })
        return entered === undefined ? yield* enter(key, providerModel, make) : [room, entered] as const
      })

    const acquire = (request: CapacityRequest): Effect.Effect<CapacityPermit, CapacityWaitExceeded, Scope.Scope> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const key = capacityKeyOf(request.providerModel, request.credentialId)
          const granted = yield* Deferred.make<CapacityPermit, CapacityWaitExceeded>()
          const permitId = `${workerId}-${++permitCounter}`
          const [room, waiter] = yield* enter(key, request.providerModel, (room, now) => ({
            permitId,
            request,
            granted,
            enteredAt: now,
            pausedAtEntry: pausedSoFar(room, now),
            status: "waiting"
          }))
          // A background waiter behind the head changes nothing the pump asks the store: no wake
          // (at saturation every arrival repeated a refused store call).
          if (request.priority === "interactive" || headOf(room) === waiter) yield* Queue.offer(room.wake, undefined)
          const bounded = request.maxWait === undefined
            ? Deferred.await(granted)
            : Deferred.await(granted).pipe(
              Effect.timeoutFail({
                duration: request.maxWait,
                onTimeout: () =>
                  new CapacityWaitExceeded({ providerModel: request.providerModel, retryAt: undefined, paused: false })
              })
            )
          // Only the wait itself is interruptible: a granted permit is always either owned by the
          // scope or given back, never dropped between the two.
          const waited = yield* Effect.exit(restore(bounded))
          if (Exit.isSuccess(waited)) {
            yield* Effect.addFinalizer(() => waited.value.release({ _tag: "Failed" }))
            return waited.value
          }
          if (waiter.status === "waiting") {
            waiter.status = "left"
            laneOf(room, request.priority).remove(waiter, false)
            yield* Queue.offer(room.wake, undefined)
          } else if (waiter.status === "granted") {
            const permit = yield* Deferred.poll(granted)
            if (Option.isSome(permit)) {
              yield* Effect.flatMap(
                Effect.either(permit.value),
                (got) => got._tag === "Right" ? got.right.release({ _tag: "NotSent" }) : Effect.void
              )
            }
          }
          return yield* Effect.failCause(waited.cause)
        })
      ).pipe(
        Effect.withSpan("ProviderCapacity.acquire", {
          captureStackTrace: false,
          attributes: { providerModel: request.providerModel, priority: request.priority }
        })
      )

    const pause = (providerModel: string, untilMs: number, credentialId?: string) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => store.pause(capacityKeyOf(providerModel, credentialId), Math.min(untilMs, now + maxPauseMs), now)
      ).pipe(
        Effect.catchAll(storeWarning),
        Effect.zipRight(Effect.suspend(() => {
          const room = rooms.get(capacityKeyOf(providerModel, credentialId))
          return room === undefined ? Effect.void : Queue.offer(room.wake, undefined)
        })),
        Effect.asVoid
      )

    const state = (providerModel: string, credentialId?: string): Effect.Effect<CapacityState> => {
      const key = capacityKeyOf(providerModel, credentialId)
      return Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => store.state(key, storeLimitsOf(limits.limitFor(providerModel)), now)
      ).pipe(
        Effect.orDie,
        Effect.map((shared) => {
          const room = rooms.get(key)
          return { ...shared, waiting: room === undefined ? 0 : room.interactive.size + room.background.size }
        })
      )
    }

    return ProviderCapacity.of({ acquire, pause, state })
  })
