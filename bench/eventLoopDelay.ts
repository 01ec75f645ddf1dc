/**
 * Preloaded (`--import`) into the API process by `bench/bodyLimit.ts`: measures the process's
 * own event-loop delay, so a slow /healthz can be told apart from a busy machine. SIGUSR2
 * prints the figures since the previous SIGUSR2 to stderr as one `event-loop-delay {json}` line
 * and starts over.
 */
import { monitorEventLoopDelay } from "node:perf_hooks"

const histogram = monitorEventLoopDelay({ resolution: 10 })
histogram.enable()
process.on("SIGUSR2", () => {
  const ms = (nanoseconds: number) => Math.round(nanoseconds / 1e4) / 100
  process.stderr.write(
    `event-loop-delay ${
      JSON.stringify({
        p50Ms: ms(histogram.percentile(50)),
        p99Ms: ms(histogram.percentile(99)),
        maxMs: ms(histogram.max)
      })
    }\n`
  )
  histogram.reset()
})
