import {
  type Array as Arr,
  Context,
  Deferred,
  Effect,
  FiberRef,
  type HashMap,
  type List,
  type LogSpan,
  Option
} from "effect"

/**
 * Hands what callers submit to `flush` in groups, one flush at a time (group commit, as
 * graphile-worker batches its job fetching and completion). A submission that finds no flush in
 * flight leads at once: its own fiber flushes it, alone, so nothing waits for company. Whatever
 * arrives meanwhile waits; when a flush ends, the first waiting submission leads the next group
 * with everything that waits by then. `submit` returns once its item was flushed. A flush runs
 * uninterruptibly, but for the waits its own work allows to be interrupted: a leader stopped
 * there abandons its group (each member's submission is interrupted) and hands the lead on.
 */
export const makeGroupRunner = <I>(
  flush: (group: Arr.NonEmptyReadonlyArray<I>) => Effect.Effect<void>,
  maxGroupSize: number
): Effect.Effect<(item: I) => Effect.Effect<void>> =>
  Effect.sync(() => {
    interface Waiting {
      readonly item: I
      readonly turn: Deferred.Deferred<"lead" | "flushed" | "abandoned">
    }
    const waiting: Array<Waiting> = []
    let leading = false
    const handOn = Effect.suspend(() => {
      const next = waiting[0]
      if (next === undefined) {
        leading = false
        return Effect.void
      }
      return Effect.asVoid(Deferred.succeed(next.turn, "lead"))
    })
    const lead = Effect.suspend(() => {
      const group = waiting.splice(0, Math.max(1, maxGroupSize))
      const [first, ...rest] = group
      if (first === undefined) return handOn
      const settle = (outcome: "flushed" | "abandoned") =>
        Effect.zipRight(
          Effect.forEach(group, (member) => Deferred.succeed(member.turn, outcome), { discard: true }),
          handOn
        )
      return Effect.uninterruptible(flush([first.item, ...rest.map((member) => member.item)])).pipe(
        Effect.onInterrupt(() => settle("abandoned")),
        Effect.zipRight(settle("flushed"))
      )
    })
    // A waiter stopped before its group formed leaves the queue; one stopped after being told to
    // lead hands the lead on, so the runner never waits for a fiber that is gone.
    const leave = (turn: Waiting["turn"]) =>
      Effect.suspend(() => {
        const index = waiting.findIndex((member) => member.turn === turn)
        if (index >= 0) waiting.splice(index, 1)
        return Effect.flatMap(
          Deferred.poll(turn),
          Option.match({
            onNone: () => Effect.void,
            onSome: (told) => Effect.flatMap(told, (outcome) => outcome === "lead" ? handOn : Effect.void)
          })
        )
      })
    return (item: I) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const turn = yield* Deferred.make<"lead" | "flushed" | "abandoned">()
          waiting.push({ item, turn })
          if (!leading) {
            leading = true
            return yield* lead
          }
          const told = yield* restore(Deferred.await(turn)).pipe(Effect.onInterrupt(() => leave(turn)))
          if (told === "lead") return yield* lead
          if (told === "abandoned") return yield* Effect.interrupt
        })
      )
  })

/** Runs an effect with something of its submitter's in place (a fiber-local value). */
export type AsSubmitter = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** Captures one fiber-local value of the submitter, to set it again wherever its work runs. */
export const carry = <V>(ref: FiberRef.FiberRef<V>): Effect.Effect<AsSubmitter> =>
  Effect.map(FiberRef.get(ref), (value): AsSubmitter => (effect) => Effect.locally(effect, ref, value))

/**
 * Fiber-local values a submission carries into the runner's fiber beside its services and log
 * annotations: none in the programs; the simulation carries the run its monitor attributes writes to.
 */
export class CarriedFiberRefs extends Context.Reference<CarriedFiberRefs>()("ai-job-engine/CarriedFiberRefs", {
  defaultValue: (): ReadonlyArray<Effect.Effect<AsSubmitter>> => []
}) {}

/** What a submission carries into the runner's fiber so its work runs as the caller's would. */
export interface CallerContext<R> {
  readonly context: Context.Context<R>
  readonly annotations: HashMap.HashMap<string, unknown>
  readonly spans: List.List<LogSpan.LogSpan>
  readonly carried: ReadonlyArray<AsSubmitter>
}

/** The caller's services (its span among them), log annotations and `carried` values, captured at submission. */
export const captureCaller = <R>(
  carried: ReadonlyArray<Effect.Effect<AsSubmitter>>
): Effect.Effect<CallerContext<R>, never, R> =>
  Effect.all({
    context: Effect.context<R>(),
    annotations: FiberRef.get(FiberRef.currentLogAnnotations),
    spans: FiberRef.get(FiberRef.currentLogSpan),
    carried: Effect.all(carried)
  })

/** Runs `effect` with the caller's services, log annotations and carried values, in whatever fiber runs it. */
export const asCaller = <A, E, R>(caller: CallerContext<R>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E> =>
  caller.carried.reduce<Effect.Effect<A, E>>(
    (wrapped, asSubmitter) => asSubmitter(wrapped),
    Effect.provide(effect, caller.context)
  ).pipe(
    Effect.locally(FiberRef.currentLogAnnotations, caller.annotations),
    Effect.locally(FiberRef.currentLogSpan, caller.spans)
  )
