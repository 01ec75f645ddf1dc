import { Array as Arr, Cause, Data, Deferred, Effect, Exit, Option, Order, type Tracer } from "effect"
import { PersistenceError } from "../domain/PersistenceError.js"
import { UnitOfWork } from "../services/UnitOfWork.js"
import { asCaller, captureCaller, CarriedFiberRefs, makeGroupRunner } from "./groupRunner.js"

/**
 * A member's body in a group runs under its own job's span, not the group's transaction's (which
 * sits in the leader's trace): this span, linked to that transaction, says in the member's trace
 * that its statements ran inside it.
 */
const inGroupSpan = <A, E, R>(
  body: Effect.Effect<A, E, R>,
  transaction: Option.Option<Tracer.AnySpan>,
  size: number
) =>
  Effect.withSpan(body, "groupCommit.member", {
    captureStackTrace: false,
    links: Option.match(transaction, {
      onNone: () => [],
      onSome: (span) => [{ _tag: "SpanLink", span, attributes: {} }]
    }),
    attributes: { "groupCommit.size": size }
  })

/**
 * Runs `body` as one transaction's worth of writes: alone, or beside others in a shared transaction.
 * `jobId` is the `ai_job` row the body writes: a group writes its members in that row order.
 */
export type Commit = <A, E, R>(body: Effect.Effect<A, E, R>, jobId: string) => Effect.Effect<A, E | PersistenceError, R>

/** The most bodies one transaction carries: a group's lock waits and its rollback stay short. */
export const maxCommitGroupSize = 32

/** A group member's body failed: the group's transaction rolls back and is told which one. */
class MemberFailed extends Data.TaggedError("MemberFailed")<{ readonly index: number }> {}

/** Members by their job's id: the `ai_job` primary key's order. */
const byJobId = Order.mapInput(Order.string, (member: Member) => member.jobId)

interface Member {
  readonly jobId: string
  /** Runs the body inside the open transaction (whose span is `transaction`), keeping its outcome; false when it failed. */
  readonly runInGroup: (transaction: Option.Option<Tracer.AnySpan>, size: number) => Effect.Effect<boolean>
  /** The kept success, once the group committed. */
  readonly settle: Effect.Effect<void>
  /** Runs the body in a transaction of its own and answers with whatever that gives. */
  readonly alone: Effect.Effect<void>
  readonly fail: (error: PersistenceError) => Effect.Effect<void>
  /** Runs `effect` as its submitter would (its span, its log annotations): the group's transaction runs as its first member's. */
  readonly asSubmitter: <X, Y>(effect: Effect.Effect<X, Y>) => Effect.Effect<X, Y>
}

/**
 * Group commit of the worker's projections (docs/architecture.md §8.4): bodies submitted while a
 * commit is in flight share the next transaction; an idle committer runs a body alone at once. A
 * failing body fails only itself: the group rolls back and reruns without it, so bodies must be
 * repeatable, and they run uninterruptibly.
 */
export const makeGroupCommit: Effect.Effect<Commit, never, UnitOfWork> = Effect.gen(function*() {
  const unitOfWork = yield* UnitOfWork
  const carried = yield* CarriedFiberRefs

  /**
   * Members run in their jobs' primary-key order, the order in which the lease beat and the group
   * lock take the same rows: in arrival order a group could deadlock with a beat (rows locked
   * crosswise), and InnoDB would roll one of them back.
   */
  const runGroup = (arrived: ReadonlyArray<Member>): Effect.Effect<void> => runOrdered(Arr.sort(arrived, byJobId))

  const runOrdered = (members: ReadonlyArray<Member>): Effect.Effect<void> => {
    const [first] = members
    if (first === undefined) return Effect.void
    if (members.length === 1) return first.alone
    const together = first.asSubmitter(
      unitOfWork.transaction(
        Effect.flatMap(Effect.option(Effect.currentSpan), (transaction) =>
          Effect.forEach(
            members,
            (member, index) =>
              Effect.flatMap(
                member.runInGroup(transaction, members.length),
                (succeeded) => succeeded ? Effect.void : Effect.fail(new MemberFailed({ index }))
              ),
            { discard: true }
          ))
      )
    )
    return Effect.flatMap(Effect.exit(together), (exit) => {
      if (Exit.isSuccess(exit)) return Effect.forEach(members, (member) => member.settle, { discard: true })
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure) && failure.value instanceof MemberFailed) {
        const index = failure.value.index
        const failed = members[index]
        return Effect.zipRight(
          failed === undefined ? Effect.void : failed.alone,
          runOrdered(members.filter((_, other) => other !== index))
        )
      }
      // A COMMIT whose outcome is unknown may have written the whole group: each body hears
      // that, as it would from a transaction of its own. Anything else rolled back: each runs alone.
      if (
        Option.isSome(failure) && failure.value instanceof PersistenceError && failure.value.commitOutcome === "unknown"
      ) {
        const unknown = failure.value
        return Effect.forEach(members, (member) => member.fail(unknown), { discard: true })
      }
      return Effect.forEach(members, (member) => member.alone, { discard: true })
    })
  }

  const submit = yield* makeGroupRunner<Member>(runGroup, maxCommitGroupSize)

  return <A, E, R>(body: Effect.Effect<A, E, R>, jobId: string): Effect.Effect<A, E | PersistenceError, R> =>
    Effect.gen(function*() {
      const caller = yield* captureCaller<R>(carried)
      const answer = yield* Deferred.make<A, E | PersistenceError>()
      let kept: Option.Option<A> = Option.none()
      yield* submit({
        jobId,
        runInGroup: (transaction, size) =>
          Effect.map(Effect.exit(asCaller(caller, inGroupSpan(body, transaction, size))), (exit) => {
            kept = Exit.isSuccess(exit) ? Option.some(exit.value) : Option.none()
            return Exit.isSuccess(exit)
          }),
        settle: Effect.suspend(() =>
          Option.match(kept, { onNone: () => Effect.void, onSome: (value) => Deferred.succeed(answer, value) })
        ),
        alone: Effect.flatMap(
          Effect.exit(asCaller(caller, unitOfWork.transaction(body))),
          (exit) => Deferred.done(answer, exit)
        ),
        fail: (error) => Deferred.fail(answer, error),
        asSubmitter: (effect) => asCaller(caller, effect)
      })
      return yield* Deferred.await(answer)
    })
})
