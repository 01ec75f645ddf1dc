import { Config, ConfigError, Context, Either, Layer, ParseResult, Schema } from "effect"
import { duplicateTopLevelKeys } from "./jsonObjectKeys.js"

/** `provider/model`, e.g. `deepseek/deepseek-chat`: the key every limit is kept under. */
export const ProviderModel = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9._-]+\/[A-Za-z0-9._:@-]+$/),
  Schema.annotations({ identifier: "ProviderModel", description: "provider/model, e.g. deepseek/deepseek-chat" })
)

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** The limits of one `provider/model`. A limit left out is not enforced. */
export const ProviderLimit = Schema.Struct({
  /** Requests per minute (a sliding 60 s window). */
  rpm: Schema.optional(PositiveInt),
  /** Tokens (prompt + completion) per minute, same window. */
  tpm: Schema.optional(PositiveInt),
  /** Concurrent requests: the ceiling the adaptive limit moves under. */
  concurrency: Schema.optional(PositiveInt),
  /** The floor the adaptive limit never goes below (default 1, at most `concurrency`). */
  minConcurrency: Schema.optional(PositiveInt)
}).pipe(
  Schema.filter((limit) =>
    limit.minConcurrency === undefined || limit.concurrency === undefined || limit.minConcurrency <= limit.concurrency
      ? undefined
      : "minConcurrency must not exceed concurrency"
  )
)
export type ProviderLimit = typeof ProviderLimit.Type

const ProviderLimits = Schema.Record({ key: ProviderModel, value: ProviderLimit })
// A key that is not `provider/model` (or an unknown field) is an error, not a limit silently dropped.
const decodeLimits = Schema.decodeUnknownEither(Schema.parseJson(ProviderLimits), { onExcessProperty: "error" })

export interface ProviderLimits {
  /** The limits of `providerModel`; undefined means unlimited. */
  readonly limitFor: (providerModel: string) => ProviderLimit | undefined
}

const fromRecord = (record: Readonly<Record<string, ProviderLimit>>): ProviderLimits => {
  const byModel = new Map(Object.entries(record))
  return { limitFor: (providerModel) => byModel.get(providerModel) }
}

/**
 * `AI_RATE_LIMITS`: JSON `{"provider/model": {"rpm":600,"tpm":1000000,"concurrency":200}}`.
 * Unset or `{}` means no limits: only the provider's own 429s (and their pauses) hold calls back.
 */
export class ProviderLimitsConfig extends Context.Tag("ai-job-engine/ProviderLimitsConfig")<
  ProviderLimitsConfig,
  ProviderLimits
>() {
  static readonly config: Config.Config<ProviderLimits> = Config.string("AI_RATE_LIMITS").pipe(
    Config.withDefault("{}"),
    Config.mapOrFail((raw) => {
      // JSON keeps the last of a key written twice: the first limit would vanish without a word.
      const duplicates = duplicateTopLevelKeys(raw)
      if (duplicates.length > 0) {
        return Either.left(
          ConfigError.InvalidData(["AI_RATE_LIMITS"], `AI_RATE_LIMITS names ${duplicates.join(", ")} more than once`)
        )
      }
      return Either.mapBoth(decodeLimits(raw), {
        onLeft: (error) =>
          ConfigError.InvalidData(
            ["AI_RATE_LIMITS"],
            `AI_RATE_LIMITS must be JSON {"provider/model":{"rpm":n,"tpm":n,"concurrency":n}} with positive whole numbers: ${
              ParseResult.TreeFormatter.formatErrorSync(error)
            }`
          ),
        onRight: fromRecord
      })
    })
  )
  static readonly layer = Layer.effect(ProviderLimitsConfig, ProviderLimitsConfig.config)
  /** Limits set in code, for tests, the simulation and the bench. */
  static readonly make = (limits: Readonly<Record<string, ProviderLimit>>) =>
    Layer.succeed(ProviderLimitsConfig, fromRecord(limits))
}
