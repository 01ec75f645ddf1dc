/**
 * `npm run --silent token -- --sub USER_ID --role USER|SUPER_ADMIN [--ttl 1h]` prints a bearer
 * token signed with the configured `AUTH_JWT_SECRET` (and nothing else on stdout, so that
 * `TOKEN=$(npm run --silent token -- ...)` works). For operators of a real deployment: the
 * engine never prints tokens for a secret it did not generate itself.
 */
import { Command, Options, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Data, Effect, Option, Schema } from "effect"
import { HttpConfig } from "../config/EngineConfig.js"
import { describeIssue } from "../domain/ValueFreeMessages.js"
import { Role, signToken, TokenClaims } from "../http/AuthTokens.js"

class TokenNotMinted extends Data.TaggedError("TokenNotMinted")<{ readonly reason: string }> {}

const units: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86_400 }
const ttlPattern = /^(\d{1,6})([smhd])$/
/** Longer-lived tokens are credentials nobody remembers handing out. */
const maxTtlSeconds = 30 * 86_400

/** `90s`, `15m`, `1h`, `7d` as seconds. */
export const parseTtl = (text: string): Option.Option<number> => {
  const match = ttlPattern.exec(text.trim())
  const unitSeconds = units[match?.[2] ?? ""]
  if (match === null || unitSeconds === undefined) return Option.none()
  const seconds = Number(match[1]) * unitSeconds
  return seconds > 0 && seconds <= maxTtlSeconds ? Option.some(seconds) : Option.none()
}

const decodeSub = Schema.decodeUnknown(TokenClaims.fields.sub)

const subOption = Options.text("sub").pipe(Options.withDescription("The user id the token names (its `sub`)."))
const roleOption = Options.choice("role", Role.literals).pipe(Options.withDescription("USER or SUPER_ADMIN."))
const ttlOption = Options.text("ttl").pipe(
  Options.withDefault("1h"),
  Options.withDescription("How long the token is valid: 90s, 15m, 1h, 7d (at most 30d).")
)

const mint = Command.make(
  "token",
  { sub: subOption, role: roleOption, ttl: ttlOption },
  ({ role, sub, ttl }) =>
    Effect.gen(function*() {
      const http = yield* HttpConfig.config.pipe(
        Effect.mapError(() => new TokenNotMinted({ reason: "AUTH_JWT_SECRET must be at least 32 characters" }))
      )
      const secret = yield* Option.match(http.authJwtSecret, {
        onNone: () =>
          Effect.fail(
            new TokenNotMinted({
              reason: "AUTH_JWT_SECRET is not set: a token must be signed with the secret the API verifies with"
            })
          ),
        onSome: Effect.succeed
      })
      const expiresInSeconds = yield* Option.match(parseTtl(ttl), {
        onNone: () =>
          Effect.fail(
            new TokenNotMinted({
              reason: `--ttl: must be a number and a unit (s, m, h, d), at most ${maxTtlSeconds / 86_400}d`
            })
          ),
        onSome: Effect.succeed
      })
      const userId = yield* decodeSub(sub).pipe(
        Effect.catchAll((error) =>
          Effect.flatMap(
            describeIssue(error.issue),
            (rule) => Effect.fail(new TokenNotMinted({ reason: `--sub: ${rule}` }))
          )
        )
      )
      yield* Console.log(yield* signToken({ sub: userId, role, expiresInSeconds }, secret))
    })
)

const cli = Command.run(mint, { name: "token", version: "0.1.0" })

const failed = Effect.sync(() => {
  process.exitCode = 1
})

cli(process.argv).pipe(
  Effect.catchTag("TokenNotMinted", (error) => Effect.zipRight(Console.error(`token: ${error.reason}`), failed)),
  // @effect/cli has printed what was wrong with the arguments already.
  Effect.catchIf(ValidationError.isValidationError, () => failed),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
