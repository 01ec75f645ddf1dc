import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Redacted, TestClock } from "effect"
import { AuthSettings } from "../../../src/config/AuthSettings.js"
import { signToken } from "../../../src/http/AuthTokens.js"
import { TokenVerifier } from "../../../src/http/TokenVerifier.js"

const secret = "a-secret-of-thirty-two-bytes-abc"

const verifier = Effect.gen(function*() {
  const context = yield* Layer.build(
    TokenVerifier.Default.pipe(Layer.provide(AuthSettings.make({ jwtSecret: secret })))
  )
  return yield* Effect.provide(TokenVerifier, context)
})

const reasonOf = <A>(result: Either.Either<A, { readonly reason: string }>) =>
  Either.match(result, { onLeft: (error) => error.reason, onRight: () => "accepted" })

describe("an HS256 token seen again", () => {
  it.scoped("is held to the clock as on first sight: accepted until its exp, then refused as expired, and stays refused", () =>
    Effect.gen(function*() {
      const tokens = yield* verifier
      // TestClock starts at 0: the token lives for the first 60 s.
      const token = yield* signToken({ sub: "user-a", role: "USER", expiresInSeconds: 60 }, Redacted.make(secret))
      const first = yield* Effect.either(tokens.verify(token))
      expect(Either.map(first, (user) => user.userId)).toEqual(Either.right("user-a"))
      yield* TestClock.adjust("59 seconds")
      expect(reasonOf(yield* Effect.either(tokens.verify(token)))).toBe("accepted")
      yield* TestClock.adjust("1 second")
      expect(reasonOf(yield* Effect.either(tokens.verify(token)))).toBe("expired")
      expect(reasonOf(yield* Effect.either(tokens.verify(token)))).toBe("expired")
    }))

  it.scoped("signed with another secret is refused however often a valid token was accepted", () =>
    Effect.gen(function*() {
      const tokens = yield* verifier
      const valid = yield* signToken({ sub: "user-a", role: "USER" }, Redacted.make(secret))
      const forged = yield* signToken(
        { sub: "user-a", role: "USER" },
        Redacted.make("another-secret-another-secret-0123456789")
      )
      expect(reasonOf(yield* Effect.either(tokens.verify(valid)))).toBe("accepted")
      expect(reasonOf(yield* Effect.either(tokens.verify(forged)))).toBe("bad signature")
      expect(reasonOf(yield* Effect.either(tokens.verify(valid)))).toBe("accepted")
    }))
})
