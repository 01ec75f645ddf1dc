import { describe, expect, layer } from "@effect/vitest"
import { Clock, Duration, Effect, Either, Option } from "effect"
import type { AiJob, NewAiJob } from "../../src/domain/AiJob.js"
import { leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import type { QueueName } from "../../src/domain/QueueName.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import type { RepositoryHarness } from "./AiJobLifecycleRepository.contract.js"

/** A job written straight through the repository, so a test picks its user, type and queue. */
const insertJob = (fields: {
  readonly userId: string
  readonly id?: string
  readonly jobType?: string
  readonly queueName?: QueueName
  readonly idempotencyKey?: string
  readonly retriedFromJobId?: string
}) =>
  Effect.gen(function*() {
    const repo = yield* AiJobLifecycleRepository
    const uow = yield* UnitOfWork
    const job: NewAiJob = {
      id: fields.id ?? (yield* newId),
      retriedFromJobId: fields.retriedFromJobId ?? null,
      userId: fields.userId,
      jobType: fields.jobType ?? "synthetic_echo",
      targetType: "test",
      targetId: "t-1",
      idempotencyKey: fields.idempotencyKey ?? null,
      requestHash: null,
      queueName: fields.queueName ?? "ai-interactive",
      priority: 50,
      input: { message: "hello" },
      credentialMode: "platform_key",
      credentialId: null,
      promptVersion: "v1",
      inputSchemaVersion: "v1",
      outputSchemaVersion: "v1",
      maxAttempts: 2
    }
    return yield* uow.transaction(repo.createJob(job))
  })

const idsOf = (jobs: ReadonlyArray<AiJob>) => jobs.map((job) => job.id)

/** A clock stopped at one instant (sleeps still pass on the given clock), so rows share a timestamp. */
const stoppedAt = (millis: number, running: Clock.Clock): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => millis,
  currentTimeMillis: Effect.succeed(millis),
  unsafeCurrentTimeNanos: () => BigInt(millis) * BigInt(1_000_000),
  currentTimeNanos: Effect.succeed(BigInt(millis) * BigInt(1_000_000)),
  sleep: (duration) => running.sleep(duration)
})

const leaseFor = (job: AiJob) => {
  const lease = leaseOf(job)
  if (lease === undefined) throw new Error(`job ${job.id} is not running`)
  return lease
}

/**
 * What the admin lists and the reaper's scans filter by — job type, queue, creation dates,
 * status sets, limits — and the edges of the lease beat and the unit of work: the facts both
 * backings must agree on beyond the main lifecycle contract.
 */
export const lifecycleFiltersContract = (harness: RepositoryHarness) =>
  describe(`AiJobLifecycleRepository filters (${harness.name})`, () => {
    const ttl = harness.lockTtlMs

    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("the job list filters by job type, queue and creation dates, without a user too", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const tag = yield* newId
          const userId = `filter-${tag}`
          const echoType = `echo_${tag.slice(0, 8)}`
          const otherType = `other_${tag.slice(0, 8)}`
          const first = yield* insertJob({ userId, jobType: echoType })
          yield* harness.advance(20)
          const background = yield* insertJob({ userId, jobType: echoType, queueName: "ai-background" })
          yield* harness.advance(20)
          const other = yield* insertJob({ userId, jobType: otherType })
          const page = { limit: 100 }

          expect(idsOf(yield* repo.list({ jobType: echoType }, page))).toStrictEqual([background.id, first.id])
          expect(idsOf(yield* repo.list({ userId, jobType: otherType }, page))).toStrictEqual([other.id])
          expect(idsOf(yield* repo.list({ userId, queueName: "ai-background" }, page))).toStrictEqual([background.id])
          expect(idsOf(yield* repo.list({ userId, queueName: "ai-interactive" }, page))).toStrictEqual([
            other.id,
            first.id
          ])
          expect(idsOf(yield* repo.list({ userId, createdFrom: background.createdAt }, page))).toStrictEqual([
            other.id,
            background.id
          ])
          expect(idsOf(yield* repo.list({ userId, createdTo: background.createdAt }, page))).toStrictEqual([first.id])
          expect(
            idsOf(yield* repo.list({ userId, createdFrom: background.createdAt, createdTo: other.createdAt }, page))
          )
            .toStrictEqual([background.id])
          // An empty status set filters nothing out.
          expect(idsOf(yield* repo.list({ userId, statuses: [] }, page))).toStrictEqual([
            other.id,
            background.id,
            first.id
          ])
          expect(idsOf(yield* repo.list({ userId }, { limit: 1 }))).toStrictEqual([other.id])
          // No filter at all: every job, newest first, this test's newest among them.
          expect(idsOf(yield* repo.list({}, { limit: 1 }))).toStrictEqual([other.id])
        }))

      it.effect("rows written in the same millisecond are ordered by id in every list and scan", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const base = yield* newId
          const userId = `tie-${base}`
          // Ids that differ in their last character only, inserted out of order.
          const idEnding = (last: string) => `${base.slice(0, -1)}${last}`
          const shuffled = ["3", "0", "5", "1", "4", "2"].map(idEnding)
          const ascending = [...shuffled].sort()
          const original = yield* insertJob({ userId })
          yield* harness.advance(5)
          const clock = yield* Effect.clock
          const at = yield* Clock.currentTimeMillis
          const inserted = yield* Effect.forEach(
            shuffled,
            (id) => insertJob({ userId, id, retriedFromJobId: original.id })
          ).pipe(
            Effect.withClock(stoppedAt(at, clock))
          )
          expect(new Set(inserted.map((job) => job.createdAt.getTime()))).toStrictEqual(new Set([at]))
          const ours = (jobs: ReadonlyArray<AiJob>) => idsOf(jobs).filter((id) => shuffled.includes(id))

          expect(ours(yield* repo.list({ userId }, { limit: 100 }))).toStrictEqual([...ascending].reverse())
          // Paging through the tie with a cursor neither skips nor repeats a row.
          const paged: Array<string> = []
          let after: AiJob | undefined
          for (let pageNo = 0; pageNo < 4; pageNo++) {
            const page = yield* repo.list({ userId }, { limit: 2, ...(after === undefined ? {} : { after }) })
            paged.push(...idsOf(page))
            after = page.at(-1)
          }
          expect(paged).toStrictEqual([...[...ascending].reverse(), original.id])
          expect(yield* Effect.map(repo.findRetriesOf(original.id), idsOf)).toStrictEqual(ascending)
          expect(ours(yield* repo.findByLifecycleStatus(["queued"], { limit: 10_000 }))).toStrictEqual(ascending)
          yield* harness.advance(50)
          expect(ours(yield* repo.findStaleQueued(Duration.millis(10), 10_000))).toStrictEqual(ascending)
        }))

      it.effect("a repeated idempotency key is refused with the user, type and key", () =>
        Effect.gen(function*() {
          const userId = `dup-${yield* newId}`
          yield* insertJob({ userId, idempotencyKey: "key-1" })
          const again = yield* Effect.either(insertJob({ userId, idempotencyKey: "key-1" }))
          expect(Either.isLeft(again) ? { ...again.left } : again.right).toStrictEqual({
            _tag: "DuplicateIdempotencyKey",
            userId,
            jobType: "synthetic_echo",
            idempotencyKey: "key-1"
          })
        }))

      it.effect("a beat calls lost a lease in another worker's name, an older lease number, and an unknown job", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const held = leaseFor(
            yield* repo.lockJob(
              (yield* insertJob({ userId: `beat-${yield* newId}` })).id,
              "worker-a",
              Duration.millis(ttl)
            )
          )
          const handedOff = leaseFor(
            yield* repo.lockJob(
              (yield* insertJob({ userId: `beat-${yield* newId}` })).id,
              "worker-a",
              Duration.millis(ttl)
            )
          )
          yield* repo.releaseLock(handedOff)
          // The same worker picks it up again: its old lease number is fenced out.
          const retaken = leaseFor(yield* repo.takeOver(handedOff.jobId, "worker-a", Duration.millis(ttl)))
          const beats = yield* repo.extendLocks([
            { lease: held, progress: 10, reportCancel: true },
            { lease: { ...held, workerId: "worker-z" }, progress: 90, reportCancel: true },
            { lease: handedOff, progress: 90, reportCancel: true },
            { lease: { ...held, jobId: yield* newId }, progress: 90, reportCancel: true }
          ], Duration.millis(ttl))
          expect(beats).toStrictEqual(["Extended", "Lost", "Lost", "Lost"])
          const progressOf = (jobId: string) =>
            Effect.map(repo.findById(jobId), (row) => Option.getOrThrow(row).progress)
          expect(yield* progressOf(held.jobId)).toBe(10)
          expect(yield* progressOf(retaken.jobId)).toBe(0)
        }))

      it.effect("a takeover that reports no progress keeps the progress the job had", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const running = yield* repo.lockJob(
            (yield* insertJob({ userId: `keep-${yield* newId}` })).id,
            "worker-a",
            Duration.millis(ttl),
            40
          )
          yield* repo.releaseLock(leaseFor(running))
          const taken = yield* repo.takeOver(running.id, "worker-b", Duration.millis(ttl))
          expect([taken.lockedBy, taken.progress]).toStrictEqual(["worker-b", 40])
        }))

      it.effect("a failed nested transaction undoes only its own writes; the outer one commits", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const uow = yield* UnitOfWork
          const userId = `nested-${yield* newId}`
          const outcome = yield* uow.transaction(
            Effect.gen(function*() {
              const kept = yield* insertJob({ userId })
              const inner = yield* Effect.either(
                uow.transaction(Effect.zipRight(insertJob({ userId }), Effect.fail("inner gives up" as const)))
              )
              const last = yield* insertJob({ userId })
              return { kept, inner, last }
            })
          )
          expect(outcome.inner).toStrictEqual(Either.left("inner gives up"))
          expect(idsOf(yield* repo.list({ userId }, { limit: 10 })).sort()).toStrictEqual(
            [outcome.kept.id, outcome.last.id].sort()
          )
        }))
    })

    // Its own store: the status scan has no user to filter by, so nothing else may be in it.
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.effect("the status scan filters by queue, oldest first, up to its limit (100 unless given)", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const userId = `scan-${yield* newId}`
          const jobs: Array<AiJob> = []
          for (const queueName of ["ai-interactive", "ai-background", "ai-interactive", "ai-background"] as const) {
            jobs.push(yield* insertJob({ userId, queueName }))
            yield* harness.advance(20)
          }
          const [a, b, c, d] = jobs as [AiJob, AiJob, AiJob, AiJob]
          yield* repo.lockJob(d.id, "worker-a", Duration.millis(ttl))

          expect(yield* repo.findByLifecycleStatus([])).toStrictEqual([])
          expect(idsOf(yield* repo.findByLifecycleStatus(["queued"]))).toStrictEqual([a.id, b.id, c.id])
          expect(idsOf(yield* repo.findByLifecycleStatus(["queued", "running"], { limit: 2 }))).toStrictEqual([
            a.id,
            b.id
          ])
          expect(idsOf(yield* repo.findByLifecycleStatus(["queued"], { queueName: "ai-background" }))).toStrictEqual([
            b.id
          ])
          expect(idsOf(yield* repo.findByLifecycleStatus(["queued", "running"], { queueName: "ai-background" })))
            .toStrictEqual([b.id, d.id])
          expect(idsOf(yield* repo.findByLifecycleStatus(["queued"], { queueName: "ai-interactive", limit: 1 })))
            .toStrictEqual([a.id])

          for (let i = 0; i < 100; i++) yield* insertJob({ userId })
          expect(yield* Effect.map(repo.findByLifecycleStatus(["queued"]), (found) => found.length)).toBe(100)
          expect(yield* Effect.map(repo.findByLifecycleStatus(["queued"], { limit: 200 }), (found) => found.length))
            .toBe(103)
        }))
    })
  })
