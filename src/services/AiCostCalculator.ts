import { Config, Effect, Layer, Option, Schema } from "effect"
import type { TokenUsage } from "./AiGateway.js"

/** Prices in micro-units (millionths of the currency unit) per million tokens. */
export interface ModelPrice {
  readonly inputMicrosPerMillionTokens: number
  readonly outputMicrosPerMillionTokens: number
}

/**
 * Defaults in micro-USD per million tokens (DeepSeek's list prices, cache-miss input). Operators
 * override or extend them with `AI_PRICE_TABLE`.
 */
export const defaultPriceTable: Readonly<Record<string, ModelPrice>> = {
  "deepseek-chat": { inputMicrosPerMillionTokens: 280_000, outputMicrosPerMillionTokens: 420_000 },
  "deepseek-reasoner": { inputMicrosPerMillionTokens: 280_000, outputMicrosPerMillionTokens: 420_000 },
  synthetic: { inputMicrosPerMillionTokens: 0, outputMicrosPerMillionTokens: 0 }
}

const Price = Schema.Struct({
  inputMicrosPerMillionTokens: Schema.NonNegativeInt,
  outputMicrosPerMillionTokens: Schema.NonNegativeInt
})

/** `AI_PRICE_TABLE`: JSON `{ "<model>": { "inputMicrosPerMillionTokens": n, "outputMicrosPerMillionTokens": n } }`. */
export const PriceTableJson = Schema.parseJson(Schema.Record({ key: Schema.String, value: Price }))

export const priceTableConfig = Schema.Config("AI_PRICE_TABLE", PriceTableJson).pipe(
  Config.option,
  Config.map(Option.match({ onNone: () => defaultPriceTable, onSome: (table) => ({ ...defaultPriceTable, ...table }) }))
)

/** Cost rounded up to whole micro-units, so that many tiny calls never sum to nothing. */
export const costOf = (price: ModelPrice, usage: { readonly promptTokens: number; readonly completionTokens: number }) =>
  Math.ceil(
    (Math.max(0, usage.promptTokens) * price.inputMicrosPerMillionTokens +
      Math.max(0, usage.completionTokens) * price.outputMicrosPerMillionTokens) / 1_000_000
  )

const makeAiCostCalculator = (table: Readonly<Record<string, ModelPrice>>) => {
  const priceOf = (model: string): Option.Option<ModelPrice> =>
    Option.fromNullable(Object.hasOwn(table, model) ? table[model] : undefined)
  return {
    priceOf,
    /** Whole micro-units, rounded up; a model missing from the table costs 0 (and logs a warning). */
    costMicros: (model: string, usage: TokenUsage): Effect.Effect<number> =>
      Option.match(priceOf(model), {
        onNone: () => Effect.as(Effect.logWarning("no price configured for model; cost recorded as 0").pipe(Effect.annotateLogs({ model })), 0),
        onSome: (price) => Effect.succeed(costOf(price, usage))
      })
  }
}

/**
 * The cost of a call, from a price table per model (docs/architecture.md §11.5). `Default` reads
 * `AI_PRICE_TABLE` over the defaults; `withTable` takes a table as given.
 */
export class AiCostCalculator extends Effect.Service<AiCostCalculator>()("ai-job-engine/AiCostCalculator", {
  effect: Effect.map(priceTableConfig, makeAiCostCalculator)
}) {
  static readonly withTable = (table: Readonly<Record<string, ModelPrice>> = defaultPriceTable): Layer.Layer<AiCostCalculator> =>
    Layer.succeed(AiCostCalculator, AiCostCalculator.make(makeAiCostCalculator(table)))
}
