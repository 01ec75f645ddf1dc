import { describe, expect, it } from "@effect/vitest"
import {
  categoryOf,
  ContentSafetyError,
  CredentialError,
  type ExecutionError,
  InternalError,
  isExecutionError,
  JobCancelledError,
  JobTimeoutError,
  ProviderError,
  ValidationError
} from "../../../src/domain/ExecutionError.js"
import type { JobDefinition } from "../../../src/domain/JobDefinition.js"
import { isRetryable, retryAfterOf } from "../../../src/domain/RetryPolicy.js"
import { syntheticEchoDefinition } from "../../../src/jobs/synthetic_echo/definition.js"

const oneOfEach: ReadonlyArray<readonly [ExecutionError, string]> = [
  [new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 1500 }), "PROVIDER"],
  [new ValidationError({ code: "VALIDATION_MALFORMED_JSON", message: "bad", problems: [] }), "VALIDATION"],
  [new ContentSafetyError({ code: "CONTENT_SAFETY_BLOCKED", message: "blocked", stage: "input" }), "CONTENT_SAFETY"],
  [new JobTimeoutError({ code: "TIMEOUT", message: "slow", timeoutMs: 10 }), "TIMEOUT"],
  [new CredentialError({ code: "CREDENTIAL_INVALID", message: "401" }), "CREDENTIAL"],
  [new JobCancelledError({ code: "CANCELLED", message: "cancelled" }), "CANCELLED"],
  [new InternalError({ code: "INTERNAL_ERROR", message: "boom" }), "INTERNAL"]
]

const retryOnTimeout: JobDefinition = syntheticEchoDefinition
const failOnTimeout: JobDefinition = {
  ...syntheticEchoDefinition,
  execution: { ...syntheticEchoDefinition.execution, abortStrategy: "fail" }
}

describe("the execution error taxonomy", () => {
  it("puts every error class in its own category", () => {
    expect(oneOfEach.map(([error]) => categoryOf(error))).toStrictEqual(oneOfEach.map(([, category]) => category))
  })

  it("retries provider, validation and internal errors, never safety, credential or cancellation ones", () => {
    expect(oneOfEach.map(([error, category]) => [category, isRetryable(error, failOnTimeout)])).toStrictEqual([
      ["PROVIDER", true],
      ["VALIDATION", true],
      ["CONTENT_SAFETY", false],
      ["TIMEOUT", false],
      ["CREDENTIAL", false],
      ["CANCELLED", false],
      ["INTERNAL", true]
    ])
  })

  it("retries a timeout only when the job type's abort strategy says so", () => {
    const timeout = new JobTimeoutError({ code: "TIMEOUT", message: "slow", timeoutMs: 10 })
    expect(isRetryable(timeout, retryOnTimeout)).toBe(true)
    expect(isRetryable(timeout, failOnTimeout)).toBe(false)
  })

  it("reads Retry-After only from a provider error", () => {
    expect(retryAfterOf(new ProviderError({ code: "PROVIDER_RATE_LIMITED", message: "429", retryAfterMs: 1500 }))).toBe(
      1500
    )
    expect(retryAfterOf(new ProviderError({ code: "PROVIDER_UNAVAILABLE", message: "503" }))).toBeUndefined()
    expect(retryAfterOf(new InternalError({ code: "INTERNAL_ERROR", message: "boom" }))).toBeUndefined()
  })

  it("recognises an execution error by its tag, and nothing else", () => {
    for (const [error] of oneOfEach) expect(isExecutionError(error)).toBe(true)
    for (
      const other of [null, undefined, "ProviderError", 42, {}, { _tag: 1 }, { _tag: "SqlError" }, new Error("plain")]
    ) {
      expect(isExecutionError(other), JSON.stringify(other)).toBe(false)
    }
  })
})
