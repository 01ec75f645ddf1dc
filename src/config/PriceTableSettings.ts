import { Config, Context, Layer, Option, Schema } from "effect"

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

export class PriceTableSettings extends Context.Tag("ai-job-engine/PriceTableSettings")<
  PriceTableSettings,
  Readonly<Record<string, ModelPrice>>
>() {
  static readonly defaults = defaultPriceTable
  static readonly config = Schema.Config("AI_PRICE_TABLE", PriceTableJson).pipe(
    Config.option,
    Config.map(
      Option.match({ onNone: () => defaultPriceTable, onSome: (table) => ({ ...defaultPriceTable, ...table }) })
    )
  )
  static readonly layer = Layer.effect(PriceTableSettings, PriceTableSettings.config)
}
