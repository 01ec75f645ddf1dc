import { Context, type Effect, type Redacted } from "effect"
import type { CredentialMode } from "../domain/CredentialMode.js"
import type {
  ContentSafetyError,
  CredentialError,
  InternalError,
  ProviderError,
  ValidationError
} from "../domain/ExecutionError.js"

/** One chat message sent to the model. Messages carry snapshot content: never log them. */
export interface ChatMessage {
  readonly role: "system" | "user" | "assistant"
  readonly content: string
}

/** The key that pays for a call, as the CredentialVault resolved it. */
export interface ResolvedCredential {
  readonly mode: CredentialMode
  /** `user_model_credential.id` for `user_deepseek_key`; null for `platform_key`. */
  readonly credentialId: string | null
  readonly provider: string
  readonly apiKey: Redacted.Redacted<string>
}

export interface TokenUsage {
  readonly promptTokens: number
  readonly completionTokens: number
  readonly totalTokens: number
}

export interface GenerateRequest {
  /** Ids only, for logs and for the synthetic provider; never content. */
  readonly job: {
    readonly id: string
    readonly type: string
    /** The call's number within its lease. */
    readonly attemptNo: number
    /** The job lease the call is made in (absent for a call outside a job run). */
    readonly leaseNo?: number
  }
  readonly messages: ReadonlyArray<ChatMessage>
  readonly provider: string
  readonly model: string
  readonly credential: ResolvedCredential
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  /** JSON output mode (`response_format: json_object`); the answer is parsed into `json`. */
  readonly jsonMode: boolean
  /**
   * The snapshot content the messages were rendered from. A real provider sees only the
   * messages and ignores this; the synthetic provider derives its answer from it.
   */
  readonly input?: unknown
  /** The job type's output as JSON Schema, for a provider that takes `response_format: json_schema`. */
  readonly outputSchema?: { readonly name: string; readonly schema: object } | undefined
}

export interface GenerateResult {
  readonly text: string
  /** `text` parsed as JSON in JSON mode; `null` otherwise. Not yet checked against any output Schema. */
  readonly json: unknown
  readonly usage: TokenUsage
  /** True when the answer reported no usage and `usage` is the engine's estimate (about 4 characters a token). */
  readonly usageEstimated?: boolean | undefined
  readonly provider: string
  readonly model: string
  readonly latencyMs: number
  readonly finishReason: string
}

/**
 * What a provider call can fail with, already in the engine's error taxonomy:
 * PROVIDER_* (retry with backoff, honouring `retryAfterMs`; `PROVIDER_REQUEST_REJECTED` only on
 * another target), VALIDATION_PROVIDER_RESPONSE / VALIDATION_MALFORMED_JSON (retry with the
 * problems in the prompt), CONTENT_SAFETY_* and CREDENTIAL_INVALID (never retried), INTERNAL_ERROR
 * (a request that could not be built, a provider that is not configured).
 */
export type GatewayError = ProviderError | ValidationError | ContentSafetyError | CredentialError | InternalError

/**
 * The provider call (docs/architecture.md §16.4). Interrupting `generate` aborts the provider call
 * (the HTTP request is cancelled), so a deadline on the EXECUTE stage really stops the work.
 */
export class AiGateway extends Context.Tag("ai-job-engine/AiGateway")<
  AiGateway,
  {
    readonly generate: (request: GenerateRequest) => Effect.Effect<GenerateResult, GatewayError>
    /**
     * Lets answers that have already arrived be read, before a caller declares a deadline passed
     * or stops a call from outside. After a pause of the whole process every timer is due at once,
     * and Node runs timers before it reads sockets. Absent: nothing to wait for (no real I/O).
     */
    readonly settle?: Effect.Effect<void>
  }
>() {}
