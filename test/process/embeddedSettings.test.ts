import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Redacted } from "effect"
import { execFile } from "node:child_process"
import { connect } from "node:net"
import { signToken } from "../../src/http/AuthTokens.js"
import { childEnv, ProcessTestError } from "./support/childProcess.js"
import { httpRequest, startProgram } from "./support/engine.js"

/**
 * The embedded program (`npm start` without DATABASE_URL / REDIS_URL) reads the API's settings
 * as the API program does, listens where `HOST` says, and prints a curl line a shell can run.
 */

const jwtSecret = "embedded-settings-secret-0123456789abcdef"
const runtimeServiceToken = "embedded-runtime-service-token-0123456789"

/** Runs one shell line with `env` added and returns its stdout. */
const runShellLine = (line: string, env: Readonly<Record<string, string>>) =>
  Effect.async<string, ProcessTestError>((resume) => {
    execFile("sh", ["-c", line], { timeout: 15_000, env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      if (error !== null) resume(Effect.fail(new ProcessTestError({ message: `${line}\n${String(error)}\n${stderr}` })))
      else resume(Effect.succeed(stdout))
    })
  })

/** Whether a TCP connection to `host:port` is accepted. */
const accepts = (host: string, port: number) =>
  Effect.async<boolean>((resume) => {
    const socket = connect({ host, port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
    return Effect.sync(() => socket.destroy())
  })

describe("the embedded program's settings", () => {
  it.live(
    "RUNTIME_SERVICE_TOKEN and AI_PLATFORM_ENABLED=false hold; HOST binds one address; the banner's curl expands $TOKEN",
    () =>
      Effect.gen(function*() {
        const engine = yield* startProgram(
          "all-in-one",
          "embedded",
          childEnv({
            AUTH_JWT_SECRET: jwtSecret,
            RUNTIME_SERVICE_TOKEN: runtimeServiceToken,
            AI_PLATFORM_ENABLED: "false",
            HOST: "127.0.0.1"
          })
        )
        const token = yield* signToken(
          { sub: "embedded-user", role: "USER", expiresInSeconds: 600 },
          Redacted.make(jwtSecret)
        )

        // The internal route takes the configured token: past authentication, no such credential.
        const resolve = `${engine.baseUrl}/internal/credentials/00000000-0000-7000-8000-000000000000/resolve`
        const resolved = yield* httpRequest("POST", resolve, { token: runtimeServiceToken, body: { jobId: "job-1" } })
        expect(resolved.status, resolved.text).toBe(404)
        expect(JSON.parse(resolved.text)).toMatchObject({ code: "CREDENTIAL_NOT_FOUND" })
        expect((yield* httpRequest("POST", resolve, { token: "x".repeat(40), body: { jobId: "job-1" } })).status).toBe(
          401
        )

        // The platform is switched off: no new AI work.
        const created = yield* httpRequest("POST", `${engine.baseUrl}/api/ai/flashcard-generations`, {
          token,
          body: { sourceText: "Plants make sugar from light.", count: 1 }
        })
        expect(created.status, created.text).toBe(503)
        expect(JSON.parse(created.text)).toMatchObject({
          code: "PLATFORM_UNAVAILABLE",
          message: "The AI platform is switched off."
        })

        // HOST=127.0.0.1: the IPv6 loopback is not served.
        const port = Number(new URL(engine.baseUrl).port)
        expect(yield* accepts("127.0.0.1", port)).toBe(true)
        expect(yield* accepts("::1", port)).toBe(false)

        // The printed curl, run by a shell with TOKEN exported, authenticates: the platform's 503,
        // where a single-quoted '$TOKEN' reached the server as the text "$TOKEN" (401).
        yield* engine.waitForOutput(/Then follow it/, Duration.seconds(20))
        const curl = engine.output().split("\n").map((line) => line.trim()).find((line) =>
          line.startsWith("curl -s -X POST")
        )
        expect(curl).toContain("http://127.0.0.1:")
        expect(curl).toContain("\"Authorization: Bearer $TOKEN\"")
        const answer = yield* runShellLine(`${curl ?? "false"} -o /dev/null -w '%{http_code}'`, { TOKEN: token })
        expect(answer).toBe("503")
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
