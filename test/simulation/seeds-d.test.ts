import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { firstFailoverSeed, runSeed } from "../../src/simulation/runner.js"
import { failuresIn, seedChunks } from "./support.js"

// The failover world (two providers with their own keys, a route `deepseek → backup`, a user on
// a key of their own, provider outages with a stream of creates through each) runs on these
// seeds, with the extended fault set; seeds 1-560 replay as they did before it.
describe(`deterministic simulation, failover, seeds ${firstFailoverSeed}-${firstFailoverSeed + 14}`, () => {
  for (const chunk of seedChunks(firstFailoverSeed, 15, 5)) {
    it.live(
      `every invariant holds on every seed (${chunk.from}-${chunk.from + chunk.count - 1})`,
      () =>
        Effect.gen(function*() {
          const result = yield* failuresIn(chunk.from, chunk.count)
          expect(result.seeds).toBe(chunk.count)
          expect(result.report).toBe("")
        }),
      170_000
    )
  }

  it.live(
    "a seed replays entry for entry, and its primary's outage opens the breaker: the backup serves, the dead provider gets a handful of calls",
    () =>
      Effect.gen(function*() {
        const seed = firstFailoverSeed + 14
        const first = yield* runSeed(seed, {}, { keepEntries: Infinity })
        const second = yield* runSeed(seed, {}, { keepEntries: Infinity })
        expect(second.traceHash).toBe(first.traceHash)
        expect(second.lastEntries).toStrictEqual(first.lastEntries)

        const entries = first.lastEntries
        const down = entries.find((entry) =>
          entry.kind === "fault" && entry.detail["kind"] === "provider-down" && entry.detail["provider"] === "deepseek"
        )
        const up = entries.find((entry) =>
          entry.kind === "fault" && entry.detail["kind"] === "provider-up" && entry.detail["provider"] === "deepseek"
        )
        expect(down).toBeDefined()
        expect(up).toBeDefined()
        const during = (at: number) => at >= down!.at && at < up!.at
        const opened = entries.filter((entry) =>
          entry.kind === "log" && String(entry.detail["message"]).startsWith("circuit breaker opened") &&
          during(entry.at)
        )
        const created = entries.filter((entry) =>
          entry.kind === "create" && entry.detail["created"] === true && during(entry.at)
        )
        const servedByBackup = entries.filter((entry) =>
          entry.kind === "call" && entry.detail["provider"] === "backup" && entry.detail["error"] === null &&
          during(entry.at)
        )
        expect(opened.length).toBeGreaterThan(0)
        expect(servedByBackup.length).toBeGreaterThan(10)
        // Not one call per job: the breaker keeps the dead provider's calls to a handful.
        expect(Number(up!.detail["calls"])).toBeLessThan(created.length / 2)
      }),
    60_000
  )
})
