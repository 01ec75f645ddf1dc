import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { scrubSecrets } from "../../../src/domain/SecretScrubbing.js"
import { describeIssue } from "../../../src/domain/ValueFreeMessages.js"
import { AdminJobListParams, StoreCredentialRequest, UserJobListParams } from "../../../src/http/ApiSchemas.js"

const messageOf = <A, I>(schema: Schema.Schema<A, I>, input: unknown) => {
  const result = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(input)
  return Either.isLeft(result) ? Effect.runSync(describeIssue(result.left.issue)) : "decoded"
}

describe("value-free decode messages", () => {
  it("name the field and the rule, never the value", () => {
    const secret = "sk-secret-value"
    expect(messageOf(StoreCredentialRequest, { apiKey: secret.repeat(40) })).toBe("apiKey: at most 512 characters")
    expect(messageOf(StoreCredentialRequest, { apiKey: `${secret} x` })).toBe("apiKey: must not contain whitespace")
    expect(messageOf(StoreCredentialRequest, { apiKey: 42 })).toBe("apiKey: must be a string")
    expect(messageOf(StoreCredentialRequest, {})).toBe("apiKey: is missing")
    expect(messageOf(StoreCredentialRequest, secret)).toBe("must be a JSON object")
    expect(messageOf(UserJobListParams, { status: secret, cursor: secret, limit: secret })).toBe(
      "status: must be \"queued\" or \"running\" or \"succeeded\" or \"failed\" or \"cancelled\"; " +
        "cursor: is not a cursor this API issued; limit: must be a whole number from 1 to 100"
    )
    expect(messageOf(AdminJobListParams, { createdFrom: secret })).toBe(
      "createdFrom: must be an ISO-8601 time between the years 1000 and 9999"
    )
  })

  it("name an unknown field only when its name reads as a field name", () => {
    expect(messageOf(StoreCredentialRequest, { apiKey: "k", apiKye: "k" })).toBe("apiKye: is not an allowed field")
    expect(messageOf(StoreCredentialRequest, { apiKey: "k", "sk-secret-value": 1 })).toBe(
      "has a field that is not allowed"
    )
  })
})

describe("scrubSecrets", () => {
  it("removes keys, bearer tokens, JWTs, long hex or base64 runs and the named secrets", () => {
    const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJl"
    const text = `a sk-abcdef123456 b Bearer tok.en c ${jwt} d ${"ab12".repeat(10)} e ${
      "QUJD".repeat(10)
    }== f short-key g`
    const scrubbed = scrubSecrets(text, ["short-key"])
    for (const secret of ["sk-abcdef123456", "tok.en", jwt, "ab12ab12", "QUJDQUJD", "short-key"]) {
      expect(scrubbed).not.toContain(secret)
    }
    expect(scrubbed).toContain("a [redacted] b")
    for (
      const kept of [
        "provider answered HTTP 400 (invalid_request_error)",
        "job 01a22faf-a96e-7c03-a756-d083b7441619 lost its lock"
      ]
    ) {
      expect(scrubSecrets(kept)).toBe(kept)
    }
  })

  it("an empty named secret removes nothing", () => {
    expect(scrubSecrets("provider answered HTTP 401", [""])).toBe("provider answered HTTP 401")
  })
})
