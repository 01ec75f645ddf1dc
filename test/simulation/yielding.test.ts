import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { runSeed, runSeeds } from "../../src/simulation/runner.js"

/**
 * A seed runs on microtasks only. Run back to back without a turn of the event loop, hundreds of
 * seeds starve the host (vitest's worker RPC timed out on a loaded machine): the host's timers
 * must run between seeds.
 */
const countEventLoopTurns = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const counter = { turns: 0, handle: setInterval(() => counter.turns++, 0) }
      return counter
    }),
    (counter) => Effect.as(effect, counter),
    (counter) => Effect.sync(() => clearInterval(counter.handle))
  ).pipe(Effect.map((counter) => counter.turns))

describe("the simulation lets the event loop run", () => {
  it.live("between the seeds of a range", () =>
    Effect.gen(function*() {
      const turns = yield* countEventLoopTurns(runSeeds(1, 4))
      expect(turns).toBeGreaterThanOrEqual(3)
    }), 60_000)

  it.live("between seeds run one by one", () =>
    Effect.gen(function*() {
      const turns = yield* countEventLoopTurns(
        Effect.forEach([1, 2, 3, 4], (seed) => runSeed(seed), { discard: true })
      )
      expect(turns).toBeGreaterThanOrEqual(3)
    }), 60_000)
})
