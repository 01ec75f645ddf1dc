import { Schema } from "effect"

export const SyntheticEchoOutput = Schema.Struct({ echo: Schema.String })
export type SyntheticEchoOutput = typeof SyntheticEchoOutput.Type
