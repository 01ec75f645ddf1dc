import { describe, expect, it } from "@effect/vitest"
import { Effect, Runtime } from "effect"
import { EventEmitter } from "node:events"
import { logWorkerErrors } from "../../../src/layers/bullmq/BullMqJobQueue.js"
import { LogCapture, LogCaptureLayer } from "../../support/logCapture.js"

describe("BullMQ worker errors", () => {
  it.effect("are logged at warning with their message, a repeat only after the connection is ready again", () =>
    Effect.gen(function*() {
      const capture = yield* LogCapture
      const runtime = yield* Effect.runtime<never>()
      const worker = new EventEmitter()
      const connection = new EventEmitter()
      logWorkerErrors(worker, connection, "ai-background", Runtime.runSync(runtime))

      worker.emit("error", new Error("connect ECONNREFUSED 127.0.0.1:6379"))
      worker.emit("error", new Error("connect ECONNREFUSED 127.0.0.1:6379"))
      worker.emit("error", new Error("Missing lock for job 42. moveToFinished"))
      connection.emit("ready")
      worker.emit("error", new Error("Missing lock for job 42. moveToFinished"))

      const lines = (yield* capture.lines).filter((line) => line.includes("BullMQ worker error"))
      expect(lines.map((line) => line.split(" | ")[0])).toStrictEqual(["WARN", "WARN", "WARN"])
      const annotations = lines.map((line) => line.split(" | ")[2])
      expect(annotations).toStrictEqual([
        "queue=ai-background error=connect ECONNREFUSED 127.0.0.1:6379",
        "queue=ai-background error=Missing lock for job 42. moveToFinished",
        "queue=ai-background error=Missing lock for job 42. moveToFinished"
      ])
    }).pipe(Effect.provide(LogCaptureLayer)))
})
