import { Schema } from "effect"
import { rowProjector } from "../rowProjector.js"
import { SyntheticEchoOutput } from "./output.js"

/** One `synthetic_echo_result` row per job (unique on job_id). */
export const syntheticEchoProjector = rowProjector({
  key: "synthetic_echo",
  output: SyntheticEchoOutput,
  table: "synthetic_echo_result",
  uniqueBy: ["job_id"],
  orderBy: "id",
  artifactType: "synthetic_echo_result",
  rows: (_job, output) => [{ echo: output.echo }],
  record: Schema.Struct({ id: Schema.String, echo: Schema.String })
})
