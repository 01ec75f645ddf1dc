import { Clock, Duration, Effect } from "effect"

interface Sleeper {
  readonly at: number
  readonly seq: number
  readonly wake: () => void
}

/**
 * The simulation's clock: virtual milliseconds that move only when the driver advances them.
 * Effect's `TestClock` polls for quiescence with real timers on every wake-up (milliseconds of
 * wall time each), far too slow for thousands of seeds; this clock wakes sleepers in time
 * order and lets the woken fibers run with `yieldNow` until the engine stops touching the
 * clock. Everything stays on Effect's scheduler, so a seed replays the same interleaving.
 */
export interface SimulatedClock extends Clock.Clock {
  /** Virtual time in milliseconds. */
  readonly now: () => number
  /** Wakes every sleeper due up to `time` in order, letting the world run after each wake-up. */
  readonly advanceTo: (time: number) => Effect.Effect<void>
  /** Lets runnable fibers run until they stop reading the clock or sleeping (bounded). */
  readonly settle: Effect.Effect<void>
  /** Sleepers waiting right now (for diagnostics). */
  readonly pendingSleepers: () => number
}

export interface SimulatedClockOptions {
  readonly startMillis: number
  /** Consecutive quiet yields that count as "settled". */
  readonly quietYields?: number
  /** Upper bound of yields per settle. */
  readonly maxYields?: number
}

export const makeSimulatedClock = (options: SimulatedClockOptions): SimulatedClock => {
  let current = options.startMillis
  let seq = 0
  let activity = 0
  const sleepers: Array<Sleeper> = []
  const quietYields = options.quietYields ?? 3
  const maxYields = options.maxYields ?? 400

  const insert = (sleeper: Sleeper) => {
    let lo = 0
    let hi = sleepers.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      const other = sleepers[mid]!
      if (other.at < sleeper.at || (other.at === sleeper.at && other.seq < sleeper.seq)) lo = mid + 1
      else hi = mid
    }
    sleepers.splice(lo, 0, sleeper)
  }

  const remove = (sleeper: Sleeper) => {
    const index = sleepers.indexOf(sleeper)
    if (index >= 0) sleepers.splice(index, 1)
  }

  const unsafeCurrentTimeMillis = () => {
    activity++
    return current
  }

  const sleep = (duration: Duration.Duration): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      activity++
      // Whole milliseconds, like a real clock: a jittered 1234.56 ms sleep wakes at 1235 ms.
      const millis = Math.ceil(Duration.toMillis(duration))
      if (!(millis > 0)) {
        resume(Effect.void)
        return
      }
      const sleeper: Sleeper = { at: current + millis, seq: seq++, wake: () => resume(Effect.void) }
      insert(sleeper)
      return Effect.sync(() => remove(sleeper))
    })

  const settle = Effect.gen(function*() {
    let quiet = 0
    for (let i = 0; i < maxYields && quiet < quietYields; i++) {
      const before = activity
      yield* Effect.yieldNow()
      quiet = activity === before ? quiet + 1 : 0
    }
  })

  const advanceTo = (time: number) =>
    Effect.gen(function*() {
      yield* settle
      while (sleepers.length > 0 && sleepers[0]!.at <= time) {
        const due = sleepers[0]!.at
        if (due > current) current = due
        while (sleepers.length > 0 && sleepers[0]!.at <= current) {
          const sleeper = sleepers.shift()!
          sleeper.wake()
        }
        yield* settle
      }
      if (time > current) current = Math.floor(time)
      yield* settle
    })

  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis,
    currentTimeMillis: Effect.sync(unsafeCurrentTimeMillis),
    unsafeCurrentTimeNanos: () => BigInt(Math.floor(unsafeCurrentTimeMillis())) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(Math.floor(unsafeCurrentTimeMillis())) * 1_000_000n),
    sleep,
    now: () => current,
    advanceTo,
    settle,
    pendingSleepers: () => sleepers.length
  }
}
