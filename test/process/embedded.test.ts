import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { execFile } from "node:child_process"
import { JobStatusResponse } from "../../src/http/ApiSchemas.js"
import { childEnv, freePort, ProcessTestError, spawnProgram } from "./support/childProcess.js"
import { awaitHealthy, decodeBody, getArtifacts, pollJob } from "./support/engine.js"

/** Runs one shell line (the banner's curl, verbatim) and returns its stdout. */
const runShellLine = (line: string) =>
  Effect.async<string, ProcessTestError>((resume) => {
    execFile("sh", ["-c", line], { timeout: 15_000 }, (error, stdout, stderr) => {
      if (error !== null) resume(Effect.fail(new ProcessTestError({ message: `${line}\n${String(error)}\n${stderr}` })))
      else resume(Effect.succeed(stdout))
    })
  })

describe("issue 7: the embedded default", () => {
  it.live(
    "`npm start` with no DATABASE_URL/REDIS_URL: the printed curl creates a flashcard job that succeeds",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const engine = yield* spawnProgram("npm start", "npm", ["start"], childEnv({ PORT: String(port) }))
        const banner = yield* engine.waitForOutput(/Then follow it/, Duration.seconds(40))
        expect(banner).not.toBeNull()
        yield* awaitHealthy(engine, `http://127.0.0.1:${port}`)
        const output = engine.output()
        expect(output).toContain("embedded mode")
        expect(output).toContain(`/docs`)

        const user = output.match(/USER token \(dev-user\):\s+(\S+)/)?.[1]
        const curl = output.split("\n").map((line) => line.trim()).find((line) => line.startsWith("curl -s -X POST"))
        expect(user).toBeDefined()
        expect(curl).toBeDefined()
        if (user === undefined || curl === undefined) return

        // The printed request, exactly as a newcomer would paste it.
        const url = curl.match(/curl -s -X POST (\S+)/)?.[1]
        expect(url).toBe(`http://localhost:${port}/api/ai/flashcard-generations`)
        expect(curl).toContain(`Bearer ${user}`)
        const created = yield* runShellLine(curl).pipe(
          Effect.flatMap((text) => decodeBody(JobStatusResponse)({ status: 202, text }))
        )
        expect(created.jobType).toBe("flashcard_generation")

        const base = `http://localhost:${port}`
        const done = yield* pollJob(base, user, created.jobId, { timeout: Duration.seconds(20) })
        expect(done.lifecycleStatus).toBe("succeeded")
        expect(done.progress).toBe(100)

        const artifacts = yield* getArtifacts(base, user, created.jobId)
        expect(artifacts.lifecycleStatus).toBe("succeeded")
        expect(artifacts.artifacts.length).toBeGreaterThan(0)
        expect(artifacts.artifacts.length).toBeLessThanOrEqual(3)
        expect(artifacts.records.length).toBe(artifacts.artifacts.length)
        expect(artifacts.artifacts.every((artifact) => artifact.artifactType === "flashcard")).toBe(true)
        for (const record of artifacts.records) {
          expect(typeof record["front"]).toBe("string")
          expect(typeof record["back"]).toBe("string")
        }
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
