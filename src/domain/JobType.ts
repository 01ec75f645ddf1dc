import { Effect, JSONSchema, ParseResult, Schema } from "effect"
import { ValidationError } from "./ExecutionError.js"
import { InvalidJobInput } from "./JobCreationErrors.js"
import { describeIssue } from "./ValueFreeMessages.js"

/**
 * A job type as the engine runs it: the definition with the Schemas of its input and output. The
 * Schemas' types are erased behind decoders so that one registry holds every job type; each type's
 * own code (prompt, projector) decodes with the same Schemas.
 */
export interface JobTypeSpec {
  /** Checked by the registry rule by rule; see `JobDefinitionRegistry.register`. */
  readonly definition: unknown
  readonly decodeInput: (input: unknown) => Effect.Effect<unknown, InvalidJobInput>
  /** Checks a provider's output against the output Schema and the job's own input. */
  readonly decodeOutput: (output: unknown, input: unknown) => Effect.Effect<unknown, ValidationError>
  /** The prompt version new jobs of this type are stamped with (`v1` when absent). */
  readonly promptVersion?: string | undefined
  /** The output as JSON Schema, for providers that take structured outputs; absent when the Schema has no JSON Schema form. */
  readonly outputJsonSchema?: object | undefined
}

const jsonSchemaOf = <O, OE>(output: Schema.Schema<O, OE>): object | undefined => {
  try {
    return JSONSchema.make(output)
  } catch {
    return undefined
  }
}

export const formatProblems = (error: ParseResult.ParseError): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) =>
    issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`
  )

/**
 * Where a decode failed, as field paths only: a parse error's messages quote the values, and
 * stored rows hold job input and provider output, which must not reach a log or an error column.
 */
export const failedPaths = (error: ParseResult.ParseError): string =>
  [
    ...new Set(
      ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => issue.path.map(String).join(".") || "(root)")
    )
  ]
    .join(", ")

export const defineJobType = <I, IE, O, OE>(spec: {
  readonly definition: unknown
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  /**
   * Rules of the output that depend on the input (at most `count` flashcards, say): the
   * problems found, phrased for the model, which sees them on its retry.
   */
  readonly checkOutput?: (input: I, output: O) => ReadonlyArray<string>
}): JobTypeSpec => {
  const jobType = typeof spec.definition === "object" && spec.definition !== null && "jobType" in spec.definition
    ? String(spec.definition.jobType)
    : "unknown"
  const decodeInput = Schema.decodeUnknown(spec.input, { errors: "all", onExcessProperty: "error" })
  const decodeOutput = Schema.decodeUnknown(spec.output, { errors: "all" })
  const outputJsonSchema = jsonSchemaOf(spec.output)
  return {
    definition: spec.definition,
    ...(outputJsonSchema === undefined ? {} : { outputJsonSchema }),
    decodeInput: (input) =>
      decodeInput(input).pipe(
        Effect.catchAll((error) =>
          Effect.flatMap(describeIssue(error.issue), (problem) =>
            Effect.fail(new InvalidJobInput({ jobType, problems: [problem] })))
        )
      ),
    decodeOutput: (output, input) =>
      decodeOutput(output).pipe(
        Effect.mapError((error) =>
          new ValidationError({
            code: "VALIDATION_OUTPUT_SCHEMA",
            message: `output of ${jobType} does not match its schema`,
            problems: formatProblems(error)
          })
        ),
        Effect.tap((decoded) => {
          const { checkOutput } = spec
          if (checkOutput === undefined) return Effect.void
          return decodeInput(input).pipe(
            Effect.orElseFail(() =>
              new ValidationError({
                code: "VALIDATION_OUTPUT_SCHEMA",
                message: `input of ${jobType} no longer decodes`,
                problems: []
              })
            ),
            Effect.flatMap((typedInput) => {
              const problems = checkOutput(typedInput, decoded)
              return problems.length === 0
                ? Effect.void
                : Effect.fail(
                  new ValidationError({
                    code: "VALIDATION_OUTPUT_SCHEMA",
                    message: `output of ${jobType} breaks a rule of its input`,
                    problems
                  })
                )
            })
          )
        })
      )
  }
}
