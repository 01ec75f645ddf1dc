import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Builds dist/ when stale: the process tests start the bundles production runs.
    globalSetup: ["test/globalSetup.ts"],
    // Each test file in its own child process (vitest's default, stated): a file that keeps its
    // event loop busy, or dies, cannot stall or take down another file's worker.
    pool: "forks",
    // Integration files each own a scratch database and a Redis key prefix, but the
    // machine has two cores: keep file parallelism modest so timing-based waits stay honest.
    maxWorkers: 2,
    minWorkers: 1,
    // A timeout only catches a hang; on a loaded two-core machine an integration test's setup
    // alone (1,000 outbox rows) took 27 s, so the default leaves room for that.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // What tests and the engine print (logs included) is shown for failing tests only.
    silent: "passed-only"
  }
})
