import { Schema } from "effect"
import { defineJobType } from "../../domain/JobType.js"
import { maxChars, minChars } from "../../domain/TextLength.js"
import { SyntheticEchoOutput } from "./output.js"

/** The engine's own test job: its output echoes its input. */
export const SyntheticEchoInput = Schema.Struct({
  message: Schema.String.pipe(minChars(1), maxChars(10_000))
})
export type SyntheticEchoInput = typeof SyntheticEchoInput.Type

export const syntheticEchoDefinition = {
  jobType: "synthetic_echo",
  metadata: {
    label: "Synthetic echo",
    description: "Echoes its input; exercises every stage of the engine without a real provider.",
    domain: "maintenance",
    version: "1.0.0"
  },
  queue: { queueName: "ai-interactive", defaultPriority: 50 },
  execution: {
    timeoutMs: 30_000,
    maxRetries: 2,
    retryBackoff: { type: "exponential", delay: 1_000 },
    cancellable: true,
    abortStrategy: "retry"
  },
  input: { schemaVersion: "synthetic_echo.input.v1" },
  output: { schemaVersion: "synthetic_echo.output.v1" },
  credential: { allowedModes: ["platform_key", "user_deepseek_key"], defaultMode: "platform_key" },
  projector: "synthetic_echo",
  security: { contentSafetyCheck: false, outputRedaction: false }
} as const

export const syntheticEcho = defineJobType({
  definition: syntheticEchoDefinition,
  input: SyntheticEchoInput,
  output: SyntheticEchoOutput,
  checkOutput: (input, output) => (output.echo === input.message ? [] : ["echo must repeat the message exactly"])
})
