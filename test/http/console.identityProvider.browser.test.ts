import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { existsSync } from "node:fs"
import puppeteer, { type Browser } from "puppeteer-core"
import { makeSigningKey, signWith, startIdentityProvider } from "../support/identityProvider.js"
import { bodyAs, flashcardBody, JobBody, jwtSecret, memoryEngine, startApi } from "./support/harness.js"

/**
 * The operator console signed in with the identity provider's token (pasted, as with an HS256
 * one): it works while the token is valid and returns to the sign-in form when it expires,
 * while watching a job live (whose stream the server closes at the same moment).
 */

// Debian's chromium (`apt-get install -y chromium`); skipped where it is not installed.
const chromium = "/usr/bin/chromium"
const audience = "ai-job-engine"
const key = makeSigningKey("ES256", "ec-console")

const launch = Effect.acquireRelease(
  Effect.promise(() =>
    puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    })
  ),
  (browser: Browser) => Effect.promise(() => browser.close())
)

const browse = <A>(run: () => Promise<A>) => Effect.promise(run)

describe("operator console with an identity provider's token", () => {
  it.live.skipIf(!existsSync(chromium))(
    "a pasted provider token signs in, and its expiry signs out, also from a job followed live",
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const idp = yield* startIdentityProvider([key])
          const api = yield* startApi(memoryEngine(), {
            auth: {
              jwtSecret,
              identityProvider: {
                issuer: idp.issuer,
                audiences: [audience],
                roleClaim: "roles",
                clockSkew: Duration.zero
              }
            }
          })
          const tokenFor = (sub: string, roles: ReadonlyArray<string>, expiresInSeconds: number) =>
            signWith(key, {
              iss: idp.issuer,
              aud: audience,
              sub,
              roles: [...roles],
              exp: Math.floor(Date.now() / 1000) + expiresInSeconds
            })
          const user = yield* tokenFor("console-user", [], 600)
          const { jobId } = yield* Effect.flatMap(
            api.request("POST", "/api/ai/flashcard-generations", { token: user, body: flashcardBody() }),
            bodyAs(JobBody)
          )

          const browser = yield* launch
          const page = yield* browse(() => browser.newPage())
          const problems: Array<string> = []
          page.on("pageerror", (error) => problems.push(String(error)))
          const signIn = (token: string) =>
            Effect.gen(function*() {
              yield* browse(() => page.waitForSelector("#token"))
              // Set at once, not typed key by key: on a loaded machine typing a JWT took longer than its life.
              yield* browse(() => page.evaluate(`document.getElementById('token').value = ${JSON.stringify(token)}`))
              yield* browse(() => page.click("#sign-in-button"))
            })

          yield* browse(() => page.goto(`${api.baseUrl}/admin`, { waitUntil: "load" }))
          // Without the role the provider's token is refused like any USER token.
          yield* signIn(user)
          yield* browse(() =>
            page.waitForFunction(
              `(document.querySelector("#sign-in-problem")?.textContent ?? "").includes("FORBIDDEN")`
            )
          )

          const problemSays = (text: string) =>
            browse(() =>
              page.waitForFunction(
                `(document.querySelector("#sign-in-problem")?.textContent ?? "").includes(${JSON.stringify(text)})`,
                { timeout: 20_000 }
              )
            )

          // An admin token valid for a few seconds, on a page that makes no request of its own: the console signs out at exp.
          yield* signIn(yield* tokenFor("console-admin", ["SUPER_ADMIN"], 6))
          yield* browse(() => page.waitForSelector("#stats-page"))
          yield* problemSays("TOKEN_EXPIRED")
          expect(yield* browse(() => page.evaluate("sessionStorage.length"))).toBe(0)

          // Following a job live when the token expires: the stream ends and the console is back at the sign-in form.
          yield* signIn(yield* tokenFor("console-admin", ["SUPER_ADMIN"], 8))
          yield* browse(() => page.waitForSelector("#stats-page"))
          yield* browse(() => page.goto(`${api.baseUrl}/admin#/jobs/${jobId}`))
          yield* browse(() =>
            page.waitForFunction(`(document.querySelector("#live-mode")?.textContent ?? "").includes("live")`)
          )
          yield* browse(() => page.waitForSelector("#sign-in", { timeout: 20_000 }))
          expect(yield* browse(() => page.evaluate("sessionStorage.length"))).toBe(0)
          expect(problems).toEqual([])
        })
      ),
    { timeout: 60_000 }
  )
})
