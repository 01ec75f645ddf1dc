import { defineConfig } from "vitest/config"

// The tests a mutant must get past: unit (memory + TestClock), the contract suites on the memory
// backing, the deterministic simulation, and the MySQL suites for the MySQL queue/outbox/lease
// adapters (contracts, filters, the PersistenceErrors a real failure provokes, the session
// bounds). MUTATE_SKIP_MYSQL=1 leaves the MySQL suites out (no MariaDB);
// MUTATE_SKIP_SIMULATION=1 leaves out the 500 seeds, for a quick run (a lower bound on the score).
// MUTATE_SKIP_PIPELINE=1 leaves out test/unit/pipeline, which reaches the layers through whole engine
// stacks: a layer then answers to its own tests only (a quicker, stricter lower bound for src/layers).
const mysqlTests = process.env.MUTATE_SKIP_MYSQL === "1" ? [] : [
  "test/integration/repositories.mysql.test.ts",
  "test/integration/repositories.filters.mysql.test.ts",
  "test/integration/persistenceErrors.mysql.test.ts",
  "test/integration/sessionBounds.mysql.test.ts"
]
const simulationTests = process.env.MUTATE_SKIP_SIMULATION === "1" ? [] : ["test/simulation/**/*.test.ts"]
const skippedTests = process.env.MUTATE_SKIP_PIPELINE === "1" ? ["test/unit/pipeline/**"] : []

export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts", ...simulationTests, ...mysqlTests],
    exclude: ["**/node_modules/**", ...skippedTests],
    testTimeout: 180_000,
    hookTimeout: 60_000
  }
})
