import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Integration files each own a scratch database and a Redis key prefix, but the
    // machine has two cores: keep file parallelism modest so timing-based waits stay honest.
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 30_000,
    hookTimeout: 60_000
  }
})
