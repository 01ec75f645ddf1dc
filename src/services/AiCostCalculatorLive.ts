import { Config, Effect, Layer, Option, Schema } from "effect"
import { AiCostCalculator, type ModelPrice } from "./AiCostCalculator.js"

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

export const makeAiCostCalculator = (table: Readonly<Record<string, ModelPrice>>) => {
  const priceOf = (model: string) => Option.fromNullable(Object.hasOwn(table, model) ? table[model] : undefined)
  return AiCostCalculator.of({
    priceOf,
    costMicros: (model, usage) =>
      Option.match(priceOf(model), {
        onNone: () => Effect.as(Effect.logWarning("no price configured for model; cost recorded as 0").pipe(Effect.annotateLogs({ model })), 0),
        onSome: (price) => Effect.succeed(costOf(price, usage))
      })
  })
}

export const AiCostCalculatorLayer = (table: Readonly<Record<string, ModelPrice>> = defaultPriceTable) =>
  Layer.succeed(AiCostCalculator, makeAiCostCalculator(table))

export const AiCostCalculatorLive = Layer.effect(AiCostCalculator, Effect.map(priceTableConfig, makeAiCostCalculator))
