import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * The longest files, longest first, as a run on this 2-core machine measured them (seconds under
 * load). Vitest without a results cache (a clean CI clone) starts the largest files first, and
 * the simulation's files are small: they ran last and left one worker idle for minutes. Starting
 * the longest ones first keeps both workers busy to the end; the order alone changes, no test.
 */
const longestFiles: ReadonlyArray<string> = [
  "test/simulation/seeds-b.test.ts", // 414
  "test/simulation/seeds-a.test.ts", // 293
  "test/simulation/seeds-c.test.ts", // 254
  "test/process/capacity.test.ts", // 165, waiting on a paced provider
  "test/simulation/seeds-d.test.ts", // 97
  "test/simulation/plantedBugs.test.ts", // 86
  "test/integration/repositories.mysql.test.ts", // 66
  "test/process/shutdown.test.ts", // 48
  "test/process/tokens.test.ts", // 43
  "test/simulation/determinism.test.ts", // 41
  "test/process/failover.test.ts" // 34
]

const rankOf = (specification: TestSpecification): number => {
  const rank = longestFiles.findIndex((file) => specification.moduleId.endsWith(file))
  return rank === -1 ? longestFiles.length : rank
}

class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    // Array.prototype.sort is stable: the rest keep vitest's own order (cached durations or size).
    return (await super.sort(files)).sort((a, b) => rankOf(a) - rankOf(b))
  }
}

/** Options every project repeats (a project does not inherit the root's test options). */
const projectOptions = {
  // A timeout only catches a hang; on a loaded two-core machine an integration test's setup
  // alone (1,000 outbox rows) took 27 s, so the default leaves room for that.
  testTimeout: 120_000,
  hookTimeout: 60_000,
  // @effect/vitest's `layer` rebinds the shared `it.effect`: each file starts from the defaults.
  setupFiles: ["test/setup/effectVitestMethods.ts"]
}

export default defineConfig({
  test: {
    // Builds dist/ when stale: the process tests start the bundles production runs.
    globalSetup: ["test/globalSetup.ts"],
    // Child processes are reused between files (vitest's forks pool decides that for all projects
    // at once): importing the engine afresh into a new process per file cost more than the unit
    // and HTTP tests themselves. Each project runs as its own batch of forks, the "isolated" one
    // first (the longest files are there); the pool recycles its forks between the two.
    pool: "forks",
    isolate: false,
    // Integration files each own a scratch database and a Redis key prefix, but the
    // machine has two cores: keep file parallelism modest so timing-based waits stay honest.
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { sequencer: LongestFirstSequencer },
    // What tests and the engine print (logs included) is shown for failing tests only.
    silent: "passed-only",
    projects: [
      {
        test: {
          ...projectOptions,
          name: "shared",
          // Memory layers, in-process servers and the engine's Docker-free stacks: their files
          // share module instances too (no per-file module reset), which is what makes them cheap.
          include: ["test/unit/**/*.test.ts", "test/http/**/*.test.ts"],
          isolate: false
        }
      },
      {
        test: {
          ...projectOptions,
          name: "isolated",
          // Processes, simulations and live MySQL/Redis stacks: every file imports the sources
          // afresh (module-level state does not carry over), as when each had its own process.
          include: ["test/**/*.test.ts"],
          exclude: ["test/unit/**", "test/http/**"],
          isolate: true
        }
      }
    ]
  }
})
