/**
 * Child process of the memory part: ONLY the engine's worker (no dispatcher, no API), on the
 * production layers (MySQL + BullMQ + Redis) with the instant synthetic gateway, consuming
 * `ai-interactive`. The parent feeds the queue and asks for memory readings; each reading is
 * taken after two full GCs (`--expose-gc`).
 *
 * argv[2]: JSON `{ target, concurrency }`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Logger, LogLevel, Queue, Schema } from "effect"
import { SyntheticGatewayControl } from "../src/layers/gateway/SyntheticGateway.js"
import { runWorker } from "../src/pipeline/worker.js"
import { parentMessages, toParent } from "./childProcess.js"
import { benchEngineLayer } from "./engineStack.js"
import { MemoryCommand, MemoryWorkerArgs } from "./memoryProtocol.js"

const reading = (label: string) =>
  Effect.gen(function*() {
    // The synthetic gateway records every call for tests; that log is the test tool's, not the
    // worker's, so it is emptied before each reading.
    const control = yield* SyntheticGatewayControl
    yield* control.reset
    yield* Effect.sleep("50 millis")
    globalThis.gc?.()
    globalThis.gc?.()
    const usage = process.memoryUsage()
    return {
      type: "memory" as const,
      label,
      rssBytes: usage.rss,
      heapUsedBytes: usage.heapUsed,
      heapTotalBytes: usage.heapTotal,
      externalBytes: usage.external,
      gcExposed: globalThis.gc !== undefined
    }
  })

const program = Effect.gen(function*() {
  const args = yield* Schema.decodeUnknown(Schema.parseJson(MemoryWorkerArgs))(process.argv[2] ?? "")
  const inbox = yield* parentMessages(MemoryCommand)
  yield* Effect.gen(function*() {
    yield* runWorker({ workerId: "bench-memory-worker", queues: ["ai-interactive"] })
    yield* toParent(yield* reading("started"))
    while (true) {
      const command = yield* Queue.take(inbox)
      if (command.type === "stop") return
      yield* toParent(yield* reading(command.label))
    }
  }).pipe(
    Effect.scoped,
    Effect.provide(benchEngineLayer(args.target, { workerConcurrency: args.concurrency }))
  )
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
