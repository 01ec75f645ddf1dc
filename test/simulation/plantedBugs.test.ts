import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { callInvariantNames } from "../../src/simulation/callChecks.js"
import { failoverInvariantNames } from "../../src/simulation/failoverChecks.js"
import { type InvariantName, invariantNames } from "../../src/simulation/invariants.js"
import type { PlantedBug } from "../../src/simulation/plantedBugs.js"
import { runSeed } from "../../src/simulation/runner.js"

/**
 * Each invariant has teeth: a small, realistic bug planted in the simulation's wiring breaks it
 * on the named seed (the first that did, searched once), and the same seed holds without it.
 */
const cases: ReadonlyArray<{ readonly bug: PlantedBug; readonly seed: number; readonly invariant: InvariantName }> = [
  { bug: "fencing-off", seed: 18, invariant: invariantNames.leaseHolderEnds },
  { bug: "takeover-without-attempt", seed: 1, invariant: invariantNames.newOwnerCounts },
  { bug: "reaper-off-by-one", seed: 1, invariant: invariantNames.workerLostExhausted },
  { bug: "ignored-cancel", seed: 3, invariant: invariantNames.cancelBeforeProject },
  { bug: "publish-before-add", seed: 1, invariant: invariantNames.publishedIsQueued },
  { bug: "retry-after-ignored", seed: 2, invariant: invariantNames.backoff },
  // Caught by the extended fault set (seeds from 501: see `SimulationSettings.extendedFaults`).
  { bug: "handoff-costs-attempt", seed: 502, invariant: invariantNames.newOwnerCounts },
  { bug: "project-unfenced", seed: 508, invariant: invariantNames.leaseHolderEnds },
  { bug: "credential-refusal-retried", seed: 501, invariant: callInvariantNames.finalRefusal },
  { bug: "snapshot-replaced-by-input", seed: 501, invariant: callInvariantNames.snapshotSent },
  { bug: "capacity-released-early", seed: 501, invariant: callInvariantNames.capacityBounded },
  { bug: "cancel-deaf", seed: 501, invariant: callInvariantNames.cancelStops },
  // Caught in the failover world (seeds from 801: see `SimulationSettings.failover`).
  { bug: "breaker-ignored", seed: 801, invariant: failoverInvariantNames.outageBounded },
  { bug: "key-crosses-provider", seed: 801, invariant: callInvariantNames.keyOwnProvider },
  { bug: "fallbacks-dropped", seed: 801, invariant: failoverInvariantNames.fallbackTried }
]

describe("deterministic simulation, planted bugs", () => {
  for (const { bug, invariant, seed } of cases) {
    it.live(`${bug}: seed ${seed} breaks "${invariant}"`, () =>
      Effect.gen(function*() {
        const planted = yield* runSeed(seed, { plantedBug: bug })
        expect(planted.violation?.invariant).toBe(invariant)
        const real = yield* runSeed(seed)
        expect(real.violation).toBeUndefined()
      }), 60_000)
  }

  it.live(
    "project-unfenced is caught through the worker frozen in PROJECT: the job it wrote is the one it held",
    () =>
      Effect.gen(function*() {
        const planted = yield* runSeed(508, { plantedBug: "project-unfenced" }, { keepEntries: Infinity })
        const frozen = planted.lastEntries.find((entry) =>
          entry.kind === "fault" && entry.detail["kind"] === "pause-in-project"
        )
        expect(frozen?.detail).toMatchObject({ kind: "pause-in-project" })
        expect(
          planted.violation?.detail.startsWith(
            `${String(frozen?.detail["holding"])}: ended succeeded by ${String(frozen?.detail["process"])} `
          )
        ).toBe(true)
      }),
    60_000
  )
})
