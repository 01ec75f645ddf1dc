import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Redacted } from "effect"
import { verifyToken } from "../../src/http/AuthTokens.js"
import { childEnv, freePort, spawnProgram } from "./support/childProcess.js"
import { awaitHealthy, createJob, flashcardRequest } from "./support/engine.js"

/**
 * Tokens are printed only for a secret the process made itself: with the operator's
 * `AUTH_JWT_SECRET` the embedded banner says how to mint one, and `npm run token` mints it.
 */

const secret = "operator-secret-for-the-token-tests-0123456789"
const jwtLike = /eyJ[\w-]+\.[\w-]+\.[\w-]+/

const runToken = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const program = yield* spawnProgram(
      "token",
      "node",
      ["--import", "tsx", "src/main/token.ts", ...args],
      childEnv(env)
    )
    const exit = yield* program.awaitExit(Duration.seconds(30))
    return { code: exit.code, output: program.output().trim() }
  })

describe("tokens for a configured secret", () => {
  it.live(
    "the embedded banner with AUTH_JWT_SECRET set prints no token, and says how to mint one that the engine accepts",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const engine = yield* spawnProgram(
          "all-in-one",
          "node",
          ["--import", "tsx", "src/main/all-in-one.ts"],
          childEnv({ PORT: String(port), AUTH_JWT_SECRET: secret })
        )
        yield* engine.waitForOutput(/Then follow it/, Duration.seconds(40))
        const base = `http://127.0.0.1:${port}`
        yield* awaitHealthy(engine, base)
        const banner = engine.output()
        expect(banner).toContain("embedded mode")
        expect(banner).not.toMatch(jwtLike)
        expect(banner).not.toContain("generated for this run")
        expect(banner).toContain("npm run --silent token -- --sub dev-user --role USER")

        const minted = yield* runToken(["--sub", "dev-user", "--role", "USER", "--ttl", "1h"], {
          AUTH_JWT_SECRET: secret
        })
        expect(minted.code).toBe(0)
        const created = yield* createJob(base, minted.output, "flashcard-generations", flashcardRequest(1))
        expect(created.lifecycleStatus).toBe("queued")
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )

  it.live(
    "npm run token prints one token signed with AUTH_JWT_SECRET (sub, role, exp from --ttl); without the secret it fails",
    () =>
      Effect.gen(function*() {
        const before = Math.floor(Date.now() / 1000)
        const minted = yield* runToken(["--sub", "ops-7", "--role", "SUPER_ADMIN", "--ttl", "2h"], {
          AUTH_JWT_SECRET: secret
        })
        expect(minted.code).toBe(0)
        expect(minted.output).toMatch(new RegExp(`^${jwtLike.source}$`))
        const user = yield* verifyToken(minted.output, Redacted.make(secret))
        expect(user).toEqual({ userId: "ops-7", role: "SUPER_ADMIN" })
        const payload: unknown = JSON.parse(
          Buffer.from(minted.output.split(".")[1] ?? "", "base64url").toString("utf8")
        )
        expect(payload).toMatchObject({ sub: "ops-7", role: "SUPER_ADMIN" })
        const exp = typeof payload === "object" && payload !== null && "exp" in payload ? payload.exp : undefined
        expect(exp).toBeGreaterThanOrEqual(before + 7200)
        expect(exp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 7200)
        // Another secret does not verify it.
        expect((yield* Effect.either(verifyToken(minted.output, Redacted.make(`${secret}-other`))))._tag).toBe("Left")

        const unset = yield* runToken(["--sub", "ops-7", "--role", "USER"], {})
        expect(unset.code).toBe(1)
        expect(unset.output).toContain("AUTH_JWT_SECRET is not set")
        expect(unset.output).not.toMatch(jwtLike)
        const badTtl = yield* runToken(["--sub", "ops-7", "--role", "USER", "--ttl", "forever"], {
          AUTH_JWT_SECRET: secret
        })
        expect(badTtl.code).toBe(1)
        expect(badTtl.output).toContain("--ttl")
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )
})
