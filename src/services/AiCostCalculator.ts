import { Effect, Layer, Option } from "effect"
import { defaultPriceTable, type ModelPrice, PriceTableSettings } from "../config/PriceTableSettings.js"
import type { TokenUsage } from "./AiGateway.js"

/** Cost rounded up to whole micro-units, so that many tiny calls never sum to nothing. */
export const costOf = (
  price: ModelPrice,
  usage: { readonly promptTokens: number; readonly completionTokens: number }
) =>
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
        onNone: () =>
          Effect.as(
            Effect.logWarning("no price configured for model; cost recorded as 0").pipe(Effect.annotateLogs({ model })),
            0
          ),
        onSome: (price) => Effect.succeed(costOf(price, usage))
      })
  }
}

/**
 * The cost of a call, from a price table per model. `Default` reads
 * `AI_PRICE_TABLE` over the defaults; `withTable` takes a table as given.
 */
export class AiCostCalculator extends Effect.Service<AiCostCalculator>()("ai-job-engine/AiCostCalculator", {
  effect: Effect.map(PriceTableSettings, makeAiCostCalculator),
  dependencies: [PriceTableSettings.layer]
}) {
  static readonly withTable = (
    table: Readonly<Record<string, ModelPrice>> = defaultPriceTable
  ): Layer.Layer<AiCostCalculator> =>
    Layer.succeed(AiCostCalculator, AiCostCalculator.make(makeAiCostCalculator(table)))
}
