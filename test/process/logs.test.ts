import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Schema } from "effect"
import { createJob, engineEnv, engineStorage, getArtifacts, pollJob, startProgram, tokenFor } from "./support/engine.js"

/** One line of `LOG_FORMAT=json` (Effect's `Logger.json`). */
const JsonLogLine = Schema.parseJson(
  Schema.Struct({
    message: Schema.Unknown,
    logLevel: Schema.String,
    timestamp: Schema.String,
    annotations: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  })
)
const decodeLine = Schema.decodeUnknownEither(JsonLogLine)

describe("issue 7 item 4: production logs", () => {
  it.live(
    "LOG_FORMAT=json: every line is one JSON object, job lines carry jobId/jobType/stage/attempt, no input or key leaks",
    () =>
      Effect.gen(function*() {
        const storage = yield* engineStorage("logs", { migrate: false })
        const providerKey = "sk-never-in-a-log-0123456789"
        const engine = yield* startProgram(
          "all-in-one",
          "all-in-one (json logs)",
          engineEnv(storage, {
            MIGRATE_ON_START: "true",
            LOG_FORMAT: "json",
            LOG_LEVEL: "Debug",
            AI_API_KEY: providerKey
          })
        )
        const token = yield* tokenFor(storage, "logs-user")
        const secretText = "SECRET-INPUT-7f3a: the mitochondrion makes ATP for the cell."
        const job = yield* createJob(engine.baseUrl, token, "flashcard-generations", {
          sourceText: secretText,
          count: 2
        })
        const done = yield* pollJob(engine.baseUrl, token, job.jobId, { timeout: Duration.seconds(20) })
        expect(done.lifecycleStatus).toBe("succeeded")
        const cards = yield* getArtifacts(engine.baseUrl, token, job.jobId)
        yield* engine.signal("SIGTERM")
        expect(yield* engine.awaitExit(Duration.seconds(15))).toEqual({ code: 0, signal: null })

        const lines = engine.output().split("\n").filter((line) => line.trim().length > 0)
        const notJson = lines.filter((line) => Either.isLeft(decodeLine(line)))
        expect(notJson, "lines that are not JSON").toEqual([])
        const parsed = lines.flatMap((line) =>
          Either.match(decodeLine(line), { onLeft: () => [], onRight: (entry) => [entry] })
        )
        const ofJob = parsed.filter((entry) => entry.annotations["jobId"] === job.jobId)
        expect(ofJob.length).toBeGreaterThan(0)
        const pipelineLines = ofJob.filter((entry) => entry.annotations["stage"] !== undefined)
        expect(pipelineLines.length).toBeGreaterThan(0)
        for (const entry of pipelineLines) {
          expect(entry.annotations["jobType"]).toBe("flashcard_generation")
          expect(entry.annotations["attempt"]).toBe(1)
        }

        // No input, provider output, token or key in any line (docs/architecture.md §14.3).
        const output = engine.output()
        expect(output).not.toContain("SECRET-INPUT-7f3a")
        expect(output).not.toContain(providerKey)
        expect(output).not.toContain(storage.jwtSecret)
        expect(output).not.toContain(token)
        for (const record of cards.records) {
          const front = record["front"]
          if (typeof front === "string" && front.length > 12) expect(output).not.toContain(front)
        }
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
