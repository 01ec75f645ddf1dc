import { Context, type Effect, type Option } from "effect"
import type { TokenUsage } from "./AiGateway.js"

/** Prices in micro-units (millionths of the currency unit) per million tokens. */
export interface ModelPrice {
  readonly inputMicrosPerMillionTokens: number
  readonly outputMicrosPerMillionTokens: number
}

/** ADR 9 AiCostCalculatorService: the cost of a call, from a price table per model. */
export class AiCostCalculator extends Context.Tag("ai-job-engine/AiCostCalculator")<
  AiCostCalculator,
  {
    readonly priceOf: (model: string) => Option.Option<ModelPrice>
    /** Whole micro-units, rounded up; a model missing from the table costs 0 (and logs a warning). */
    readonly costMicros: (model: string, usage: TokenUsage) => Effect.Effect<number>
  }
>() {}
