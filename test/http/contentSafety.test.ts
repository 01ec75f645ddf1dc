import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, Schedule } from "effect"
import { memoryEngineStack, startEngine } from "../support/engineStack.js"
import { mysqlRedisInfrastructure } from "../support/liveInfrastructure.js"
import { bodyAs, feynmanBody, JobBody, startApi, tokenFor } from "./support/harness.js"

const terminal = ["succeeded", "failed", "cancelled"]

/** The engine's own configuration: one blocked term, everything else at its default. */
const blockingBomb = ConfigProvider.fromMap(new Map([["CONTENT_SAFETY_BLOCKED_TERMS", "bomb"]]))

describe("content safety over the API (real server, engine running on MySQL + Redis)", () => {
  it.live(
    "a blocked term disguised with invisible characters or look-alikes is refused like the plain term",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          // Built once here: the stack is `Layer.fresh`, and the server and the test must share it.
          const engine = yield* Layer.build(
            memoryEngineStack({ infrastructure: mysqlRedisInfrastructure("http_content_safety") })
          ).pipe(Effect.withConfigProvider(blockingBomb))
          const api = yield* startApi(Layer.succeedContext(engine))
          yield* Effect.provide(startEngine(), engine)
          const token = yield* tokenFor("user-a")

          const explanations = {
            plain: "It works like a bomb going off in slow motion.",
            zeroWidthSpace: "It works like a b\u200Bomb going off in slow motion.",
            zeroWidthJoiner: "It works like a bo\u200Dmb going off in slow motion.",
            softHyphen: "It works like a b\u00ADomb going off in slow motion.",
            cyrillicO: "It works like a b\u043Emb going off in slow motion.",
            fullWidth: "It works like a ＢＯＭＢ going off in slow motion.",
            harmless: "Plants use sunlight to turn water and air into sugar, and breathe out oxygen."
          }
          const outcomes: Record<string, { readonly status: string; readonly errorCode: string | undefined }> = {}
          for (const [name, explanation] of Object.entries(explanations)) {
            const created = yield* bodyAs(JobBody)(
              yield* api.request("POST", "/api/ai/feynman-evaluations", { token, body: feynmanBody({ explanation }) })
            )
            // Polls the job's status as a client would, until the engine has finished it.
            const done = yield* api.request("GET", `/api/ai/jobs/${created.jobId}`, { token }).pipe(
              Effect.flatMap(bodyAs(JobBody)),
              Effect.repeat(
                Schedule.recurUntil((job: typeof JobBody.Type) => terminal.includes(job.lifecycleStatus)).pipe(
                  Schedule.addDelay(() => "20 millis")
                )
              ),
              Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error(`job ${name} never finished`) })
            )
            outcomes[name] = { status: done.lifecycleStatus, errorCode: done.errorCode }
          }

          const blocked = { status: "failed", errorCode: "CONTENT_SAFETY_BLOCKED" }
          expect(outcomes).toEqual({
            plain: blocked,
            zeroWidthSpace: blocked,
            zeroWidthJoiner: blocked,
            softHyphen: blocked,
            cyrillicO: blocked,
            fullWidth: blocked,
            harmless: { status: "succeeded", errorCode: undefined }
          })
        })
      ).pipe(Logger.withMinimumLogLevel(LogLevel.None)),
    60_000
  )
})
