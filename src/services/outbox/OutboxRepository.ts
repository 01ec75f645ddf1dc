import { Context, type Duration, type Effect, type Option, Schema } from "effect"
import type { NewOutboxEvent, OutboxBacklog, OutboxCounts, OutboxEvent, OutboxLane } from "../../domain/OutboxEvent.js"
import { allOutboxStatuses, OutboxStatus } from "../../domain/OutboxEvent.js"
import type { PersistenceError } from "../../domain/PersistenceError.js"

export class OutboxEventNotFound extends Schema.TaggedError<OutboxEventNotFound>()("OutboxEventNotFound", {
  eventId: Schema.String
}) {}

/** Only a `dead` event can be replayed. */
export class OutboxEventNotDead extends Schema.TaggedError<OutboxEventNotDead>()("OutboxEventNotDead", {
  eventId: Schema.String,
  status: OutboxStatus
}) {}

/**
 * A new event's row, all but the times the store's clock sets (`availableAt` is `delay` from
 * now; `createdAt`, `updatedAt`): `pending`, unclaimed, never tried. Both stores insert exactly this.
 */
export const pendingEventFields = (
  event: NewOutboxEvent
): Omit<OutboxEvent, "availableAt" | "createdAt" | "updatedAt" | "traceParent"> => ({
  lane: event.lane ?? "enqueue",
  deliveredTo: [],
  id: event.id,
  eventType: event.eventType,
  aggregateType: event.aggregateType,
  aggregateId: event.aggregateId,
  dedupeKey: event.dedupeKey,
  payload: event.payload,
  status: "pending",
  attemptCount: 0,
  lockedBy: null,
  lockedAt: null,
  publishedAt: null,
  lastError: null
})

/** `countByStatus`'s answer from per-status totals: every status present, 0 when none; unknown statuses ignored. */
export const outboxCountsOf = (totals: Iterable<{ readonly status: string; readonly total: number }>): OutboxCounts => {
  const counts: Record<OutboxStatus, number> = { pending: 0, processing: 0, published: 0, failed: 0, dead: 0 }
  for (const { status, total } of totals) {
    const known = allOutboxStatuses.find((candidate) => candidate === status)
    if (known !== undefined) counts[known] += total
  }
  return counts
}

/** The last event of the previous page. */
export interface OutboxListCursor {
  readonly createdAt: Date
  readonly id: string
}

/** Newest first, ties by id descending: the order `listByStatus` pages in. */
export const isBeforeCursor = (
  event: { readonly createdAt: Date; readonly id: string },
  after: OutboxListCursor
): boolean =>
  event.createdAt.getTime() < after.createdAt.getTime() ||
  (event.createdAt.getTime() === after.createdAt.getTime() && event.id < after.id)

/** What happened to a failed dispatch: back to pending after a delay, or dead. */
export type DispatchFailureOutcome = "retry_scheduled" | "dead"

/**
 * How one delivery round of a `notify` event ended. `deliveredTo` is
 * every target that has acknowledged it so far, this round's included.
 */
export type DeliverySettlement =
  /** Every target acknowledged: `published`. */
  | { readonly _tag: "Delivered"; readonly deliveredTo: ReadonlyArray<string> }
  /** Some did not: back to `pending`, available again after `retryDelay`. */
  | {
    readonly _tag: "RetryLater"
    readonly deliveredTo: ReadonlyArray<string>
    readonly error: string
    readonly retryDelay: Duration.Duration
  }
  /** The retry time is spent: `dead`, for an operator to replay. */
  | { readonly _tag: "GiveUp"; readonly deliveredTo: ReadonlyArray<string>; readonly error: string }

/** `DeliverySettlement`'s outcome as the event's new status. */
export type DeliveryOutcome = "published" | DispatchFailureOutcome

/** The transactional outbox (docs/architecture.md §6). Time is the store's clock, as for job locks. */
export class OutboxRepository extends Context.Tag("ai-job-engine/OutboxRepository")<
  OutboxRepository,
  {
    /**
     * Inserts inside the caller's transaction. A duplicate `dedupe_key` is an idempotent
     * success: the existing event's id comes back with `duplicate: true`.
     */
    readonly createInTransaction: (
      event: NewOutboxEvent
    ) => Effect.Effect<{ readonly eventId: string; readonly duplicate: boolean }, PersistenceError>
    /**
     * Inserts many new events (a batch create's, one per new job) in one statement inside the
     * caller's transaction. Their dedupe keys must be new: one already used fails the whole write.
     */
    readonly createManyInTransaction: (events: ReadonlyArray<NewOutboxEvent>) => Effect.Effect<void, PersistenceError>
    readonly findById: (eventId: string) => Effect.Effect<Option.Option<OutboxEvent>, PersistenceError>
    /** A job's events, oldest first (the enqueue, any requeues, its terminal event). */
    readonly findByAggregate: (aggregateId: string) => Effect.Effect<ReadonlyArray<OutboxEvent>, PersistenceError>
    /**
     * Claims up to `limit` dispatchable events (`pending`, `available_at` reached) of one
     * lane (`enqueue` unless named) for `dispatcherId` in one compare-and-set; events another
     * dispatcher holds are skipped.
     */
    readonly claimBatch: (
      dispatcherId: string,
      limit: number,
      lane?: OutboxLane
    ) => Effect.Effect<ReadonlyArray<OutboxEvent>, PersistenceError>
    /**
     * The creating process added these events' jobs to the queue itself: still-`pending` ones become
     * `published` in one write, so no dispatcher adds them again; claimed ones are left to their dispatcher.
     */
    readonly markPublishedDirect: (eventIds: ReadonlyArray<string>) => Effect.Effect<number, PersistenceError>
    /**
     * `processing → published` for a dispatched batch in one write, only for the events
     * `dispatcherId` still holds the claim on; returns how many it published.
     */
    readonly markPublishedMany: (
      eventIds: ReadonlyArray<string>,
      dispatcherId: string
    ) => Effect.Effect<number, PersistenceError>
    /**
     * Counts a failed dispatch. Below `maxAttempts` the event goes back to `pending`, available
     * after `retryDelay`; at `maxAttempts` it is `dead`.
     */
    readonly markDispatchFailed: (
      eventId: string,
      dispatcherId: string,
      error: string,
      options: { readonly retryDelay: Duration.Duration; readonly maxAttempts: number }
    ) => Effect.Effect<Option.Option<DispatchFailureOutcome>, PersistenceError>
    /**
     * Records one delivery round of a `notify` event this dispatcher holds: the targets
     * that acknowledged, and the event published, back to pending after a delay (a failure
     * counted) or dead. None when the claim was lost meanwhile (nothing written).
     */
    readonly settleDelivery: (
      eventId: string,
      dispatcherId: string,
      settlement: DeliverySettlement
    ) => Effect.Effect<Option.Option<DeliveryOutcome>, PersistenceError>
    /** A stopping dispatcher's own claims go back to `pending` at once; returns how many. */
    readonly releaseClaimsOf: (dispatcherId: string) => Effect.Effect<number, PersistenceError>
    /** `processing` events claimed longer ago than `lockTtl` go back to `pending` (§6.4). */
    readonly releaseExpiredLocks: (lockTtl: Duration.Duration) => Effect.Effect<number, PersistenceError>
    /** Every event of either lane, per status (the operator's overview). */
    readonly countByStatus: Effect.Effect<OutboxCounts, PersistenceError>
    /**
     * One lane's backlog in one read, for its gauges: a growing notify backlog (an endpoint down)
     * must not look like jobs waiting to be enqueued. Reads only unpublished and dead rows.
     */
    readonly backlogOf: (lane: OutboxLane) => Effect.Effect<OutboxBacklog, PersistenceError>
    /** A `dead` event back to `pending`, attempts reset. */
    readonly replayDead: (
      eventId: string
    ) => Effect.Effect<OutboxEvent, OutboxEventNotFound | OutboxEventNotDead | PersistenceError>
    /** Every `dead` event back to `pending`, attempts reset, in one write; returns how many. */
    readonly replayAllDead: Effect.Effect<number, PersistenceError>
    /** Events in `status`, newest first, keyset-paginated on (`createdAt`, `id`) like the job list. */
    readonly listByStatus: (
      status: OutboxStatus,
      page: { readonly after?: OutboxListCursor | undefined; readonly limit: number }
    ) => Effect.Effect<ReadonlyArray<OutboxEvent>, PersistenceError>
    /** How long the oldest `pending` event has existed, by the store's clock; None when none is pending. */
    readonly oldestPendingAgeMs: Effect.Effect<Option.Option<number>, PersistenceError>
  }
>() {}
