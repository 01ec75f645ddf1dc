import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Duration, Effect, Either, Fiber, Option, Ref, type Tracer } from "effect"
import type { AiJob, JobLease } from "../../src/domain/AiJob.js"
import { leaseOf } from "../../src/domain/AiJob.js"
import { newId } from "../../src/domain/Ids.js"
import { makeGroupCommit } from "../../src/pipeline/groupCommit.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { ArtifactRepository } from "../../src/services/ArtifactRepository.js"
import { OutboxRepository } from "../../src/services/outbox/OutboxRepository.js"
import { UnitOfWork } from "../../src/services/UnitOfWork.js"
import type { TerminalEventsHarness } from "./TerminalEvents.contract.js"

const freshRunning = (workerId = "worker-g") =>
  Effect.gen(function*() {
    const { job } = yield* (yield* AiJobService).createJob({
      userId: `user-${yield* newId}`,
      jobType: "synthetic_echo",
      targetType: "test",
      targetId: "t-1",
      input: { message: "grouped" }
    })
    return yield* Effect.flatMap(AiJobLifecycleRepository, (repo) =>
      repo.lockJob(job.id, workerId, Duration.millis(60_000)))
  })

/** A span's name and its parents' names, innermost first. */
const spanNames = (span: Tracer.AnySpan | undefined): ReadonlyArray<string> => {
  const names: Array<string> = []
  let current = Option.fromNullable(span)
  while (Option.isSome(current) && current.value._tag === "Span") {
    names.push(current.value.name)
    current = current.value.parent
  }
  return names
}

const leaseFor = (job: AiJob): JobLease => {
  const lease = leaseOf(job)
  if (lease === undefined) throw new Error(`job ${job.id} is not running`)
  return lease
}

const reload = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (repo) => repo.findById(jobId)).pipe(Effect.map(Option.getOrThrow))

const artifactIdsOf = (jobId: string) =>
  Effect.flatMap(ArtifactRepository, (artifacts) => artifacts.listByJob(jobId)).pipe(
    Effect.map((rows) => rows.map((row) => row.artifactId))
  )

/** What PROJECT commits for a job, in small: an artifact, then the fenced success. */
const projection = (job: AiJob, artifactId: string, options: { readonly honourCancel?: boolean } = {}) =>
  Effect.gen(function*() {
    yield* Effect.flatMap(
      ArtifactRepository,
      (artifacts) => artifacts.record(job.id, [{ artifactType: "synthetic_echo_result", artifactId, ordinal: 0 }])
    )
    return yield* Effect.flatMap(
      AiJobLifecycleRepository,
      (repo) =>
        repo.markSucceeded(leaseFor(job), "c".repeat(64), { locked: job, honourCancel: options.honourCancel === true })
    )
  })

/**
 * A group committer over a unit of work that counts its outermost transactions, and a gate: the
 * first body submitted holds its (lone) transaction open until `open`, so what is submitted
 * meanwhile waits and makes the next group.
 */
const withCommitter = Effect.gen(function*() {
  const unitOfWork = yield* UnitOfWork
  const transactions = yield* Ref.make(0)
  const counting = UnitOfWork.of({
    transaction: (effect) => Effect.zipRight(Ref.update(transactions, (n) => n + 1), unitOfWork.transaction(effect))
  })
  const commit = yield* makeGroupCommit.pipe(Effect.provideService(UnitOfWork, counting))
  /**
   * Holds the committer with one transaction, submits each body meanwhile, lets every submission
   * reach the committer, then lets the held one commit: the bodies make the next group.
   */
  const submitTogether = <A, E>(
    bodies: ReadonlyArray<readonly [AiJob, Effect.Effect<A, E, ArtifactRepository | AiJobLifecycleRepository>]>
  ) =>
    Effect.gen(function*() {
      const holder = yield* freshRunning()
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const held = yield* Effect.fork(commit(
        Effect.zipRight(
          Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate)),
          projection(holder, "held")
        ),
        holder.id
      ))
      yield* Deferred.await(entered)
      const fibers = yield* Effect.forEach(
        bodies,
        ([job, body]) => Effect.fork(Effect.either(commit(body, job.id).pipe(Effect.withSpan(`submitter ${job.id}`))))
      )
      // Each forked submission runs up to its hand-in on the next turns of the scheduler.
      for (let turn = 0; turn < 50; turn++) yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      expect((yield* Fiber.join(held)).lifecycleStatus).toBe("succeeded")
      return yield* Effect.forEach(fibers, Fiber.join)
    })
  return { commit, transactions, submitTogether }
})

/**
 * docs/architecture.md §8.4: projections that finish together commit in one transaction; one
 * that finds the committer idle commits at once in its own; a body that fails inside a group
 * fails only itself (the group rolls back, it runs again alone, the others run again together).
 */
export const groupCommitContract = (harness: TerminalEventsHarness) =>
  describe(`group commit of projections (${harness.name})`, () => {
    layer(harness.layer, { timeout: 60_000, excludeTestServices: harness.liveClock })((it) => {
      it.scoped("a lone projection commits at once, in a transaction of its own", () =>
        Effect.gen(function*() {
          const unitOfWork = yield* UnitOfWork
          const transactions = yield* Ref.make(0)
          const commit = yield* makeGroupCommit.pipe(Effect.provideService(
            UnitOfWork,
            UnitOfWork.of({
              transaction: (effect) =>
                Effect.zipRight(Ref.update(transactions, (n) => n + 1), unitOfWork.transaction(effect))
            })
          ))
          const job = yield* freshRunning()
          // Nothing else is submitted: a committer that waited for company would never answer under a TestClock.
          const done = yield* commit(projection(job, "alone"), job.id)
          expect(done.lifecycleStatus).toBe("succeeded")
          expect(yield* Ref.get(transactions)).toBe(1)
          expect(yield* reload(job.id)).toStrictEqual(done)
          expect(yield* artifactIdsOf(job.id)).toStrictEqual(["alone"])
        }))

      it.scoped("projections submitted while a commit is in flight share the next transaction", () =>
        Effect.gen(function*() {
          const jobs = yield* Effect.all([freshRunning(), freshRunning(), freshRunning()])
          const { submitTogether, transactions } = yield* withCommitter
          const answers = yield* submitTogether(jobs.map((job, index) => [job, projection(job, `together-${index}`)]))
          expect(answers.map((answer) => Either.isRight(answer) && answer.right.lifecycleStatus)).toStrictEqual([
            "succeeded",
            "succeeded",
            "succeeded"
          ])
          // The held one alone, then the three in one.
          expect(yield* Ref.get(transactions)).toBe(2)
          for (const [index, job] of jobs.entries()) {
            expect((yield* reload(job.id)).lifecycleStatus).toBe("succeeded")
            expect(yield* artifactIdsOf(job.id)).toStrictEqual([`together-${index}`])
          }
        }))

      it.scoped("a group writes its members in their jobs' row order, whatever order they finished in", () =>
        Effect.gen(function*() {
          const jobs = yield* Effect.all([freshRunning(), freshRunning(), freshRunning(), freshRunning()])
          const rowOrder = jobs.map((job) => job.id).sort()
          const written = yield* Ref.make<ReadonlyArray<string>>([])
          const { submitTogether, transactions } = yield* withCommitter
          // Finished in the reverse of row order: the order a lease beat's one UPDATE would lock them crosswise to.
          const answers = yield* submitTogether(
            [...jobs].sort((a, b) => (a.id < b.id ? 1 : -1)).map((job) => [
              job,
              Effect.zipRight(Ref.update(written, (ids) => [...ids, job.id]), projection(job, `ordered-${job.id}`))
            ])
          )
          expect(answers.map((answer) => Either.isRight(answer) && answer.right.lifecycleStatus)).toStrictEqual(
            Array.from({ length: 4 }, () => "succeeded")
          )
          expect(yield* Ref.get(transactions)).toBe(2)
          expect(yield* Ref.get(written)).toStrictEqual(rowOrder)
        }))

      it.scoped("a grouped member runs under its submitter's span, linked to the group's transaction", () =>
        Effect.gen(function*() {
          const jobs = yield* Effect.all([freshRunning(), freshRunning(), freshRunning()])
          const seen = new Map<string, Tracer.AnySpan>()
          const { submitTogether } = yield* withCommitter
          yield* submitTogether(jobs.map((job) => [
            job,
            Effect.zipRight(
              Effect.tap(Effect.orDie(Effect.currentSpan), (span) => Effect.sync(() => seen.set(job.id, span))),
              projection(job, "spanned")
            )
          ]))
          // The group's transaction runs as its first member's, in row order.
          const leader = jobs.map((job) => job.id).sort()[0]
          for (const job of jobs) {
            const span = seen.get(job.id)
            expect(span?._tag === "Span" && span.name).toBe("groupCommit.member")
            expect(spanNames(span).slice(1, 2)).toStrictEqual([`submitter ${job.id}`])
            const linked = span?._tag === "Span" ? span.links.map((link) => link.span) : []
            expect(linked).toHaveLength(1)
            expect(spanNames(linked[0])).toContain(`submitter ${leader}`)
          }
        }))

      it.scoped("a projection that fails in a group leaves nothing behind, runs again alone, and the others commit", () =>
        Effect.gen(function*() {
          const [first, flaky, last] = yield* Effect.all([freshRunning(), freshRunning(), freshRunning()])
          const { submitTogether } = yield* withCommitter
          const runs = yield* Ref.make(0)
          // Its first run writes an artifact, then fails: that write must roll back with the group.
          const flakyBody = Effect.flatMap(Ref.updateAndGet(runs, (n) => n + 1), (run) =>
            run === 1
              ? Effect.zipRight(projection(flaky!, "poisoned").pipe(Effect.asVoid), Effect.fail("transient" as const))
              : Effect.asVoid(projection(flaky!, "second-run")))
          const answers = yield* submitTogether([
            [first!, Effect.asVoid(projection(first!, "first"))],
            [flaky!, flakyBody],
            [last!, Effect.asVoid(projection(last!, "last"))]
          ])
          expect(answers.map(Either.isRight)).toStrictEqual([true, true, true])
          expect(yield* Ref.get(runs)).toBe(2)
          expect(yield* artifactIdsOf(flaky!.id)).toStrictEqual(["second-run"])
          expect(yield* artifactIdsOf(first!.id)).toStrictEqual(["first"])
          expect(yield* artifactIdsOf(last!.id)).toStrictEqual(["last"])
          for (const job of [first!, flaky!, last!]) expect((yield* reload(job.id)).lifecycleStatus).toBe("succeeded")
          // A body that fails alone too: its submitter hears its own error; the group still commits.
          const [other, doomed] = yield* Effect.all([freshRunning(), freshRunning()])
          const [ok, refused] = yield* submitTogether([
            [other!, Effect.asVoid(projection(other!, "other"))],
            [doomed!, Effect.zipRight(projection(doomed!, "doomed"), Effect.fail("always" as const))]
          ])
          expect(Either.isRight(ok!)).toBe(true)
          expect(refused).toStrictEqual(Either.left("always"))
          expect((yield* reload(doomed!.id)).lifecycleStatus).toBe("running")
          expect(yield* artifactIdsOf(doomed!.id)).toStrictEqual([])
        }))

      it.scoped("a member fenced out (its lease taken over) commits nothing and stops no other member", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const [before, zombie, after] = yield* Effect.all([
            freshRunning(),
            freshRunning("worker-lost"),
            freshRunning()
          ])
          // The lease is lost: released (a hand-off), then taken by another worker.
          yield* repo.releaseLock(leaseFor(zombie!))
          const owner = yield* repo.takeOver(zombie!.id, "worker-new", Duration.millis(60_000))
          const { submitTogether } = yield* withCommitter
          const answers = yield* submitTogether([
            [before!, projection(before!, "before")],
            [zombie!, projection(zombie!, "zombie")],
            [after!, projection(after!, "after")]
          ])
          expect(answers.map((answer) => Either.isLeft(answer) ? answer.left._tag : answer.right.lifecycleStatus))
            .toStrictEqual(["succeeded", "LockLost", "succeeded"])
          expect(yield* reload(zombie!.id)).toStrictEqual(owner)
          expect(yield* artifactIdsOf(zombie!.id)).toStrictEqual([])
          const events = yield* Effect.flatMap(OutboxRepository, (outbox) => outbox.findByAggregate(zombie!.id))
          expect(events.filter((event) => event.eventType !== "ai.job.enqueue")).toStrictEqual([])
        }))

      it.scoped("a cancel requested before a grouped success wins for that job alone", () =>
        Effect.gen(function*() {
          const repo = yield* AiJobLifecycleRepository
          const [kept, cancelled] = yield* Effect.all([freshRunning(), freshRunning()])
          yield* repo.requestCancel(cancelled!.id)
          const { submitTogether } = yield* withCommitter
          const answers = yield* submitTogether([
            [kept!, projection(kept!, "kept", { honourCancel: true })],
            [cancelled!, projection(cancelled!, "cancelled", { honourCancel: true })]
          ])
          expect(answers.map((answer) => Either.isLeft(answer) ? answer.left._tag : answer.right.lifecycleStatus))
            .toStrictEqual(["succeeded", "CancelRequestedBeforeSuccess"])
          const row = yield* reload(cancelled!.id)
          expect([row.lifecycleStatus, row.cancelRequestedAt !== null, row.outputHash]).toStrictEqual([
            "running",
            true,
            null
          ])
          expect(yield* artifactIdsOf(cancelled!.id)).toStrictEqual([])
          expect(yield* artifactIdsOf(kept!.id)).toStrictEqual(["kept"])
        }))
    })
  })
