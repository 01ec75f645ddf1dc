import { Effect, HashMap, Layer, Option, Ref, Schema } from "effect"
import {
  JobDefinition,
  JobDefinitionDraft,
  JobPriority,
  JobTimeoutMs,
  jobTypePattern,
  maxRetriesLimit
} from "../domain/JobDefinition.js"
import type { JobTypeSpec } from "../domain/JobType.js"
import { formatProblems } from "../domain/JobType.js"
import { allQueueNames } from "../domain/QueueName.js"
import {
  CredentialModeNotAllowed,
  DuplicateJobDefinition,
  InvalidJobType,
  InvalidMaxRetries,
  InvalidPriority,
  InvalidQueue,
  InvalidRetryBackoff,
  InvalidTimeout,
  type JobDefinitionError,
  MalformedJobDefinition,
  UnknownJobType,
  UnknownProjector
} from "../domain/RegistryErrors.js"
import { ResultProjectors } from "./ResultProjectors.js"

/** A job type the registry accepted: its checked definition and its decoders. */
export interface RegisteredJobType extends Omit<JobTypeSpec, "definition"> {
  readonly definition: JobDefinition
}

// The bounds live in the JobDefinition Schema; these name the rule a definition broke.
const isTimeout = Schema.is(JobTimeoutMs)
const isPriority = Schema.is(JobPriority)

const credentialModes: ReadonlyArray<string> = ["platform_key", "user_deepseek_key"]

const checkRules = (
  draft: JobDefinitionDraft,
  projectorKeys: ReadonlyArray<string>
): Option.Option<JobDefinitionError> => {
  const { jobType } = draft
  const { timeoutMs, maxRetries, retryBackoff } = draft.execution
  const priority = draft.queue.defaultPriority
  if (!jobTypePattern.test(jobType)) return Option.some(new InvalidJobType({ jobType }))
  if (!allQueueNames.some((name) => name === draft.queue.queueName)) {
    return Option.some(new InvalidQueue({ jobType, queueName: draft.queue.queueName }))
  }
  if (!isTimeout(timeoutMs)) {
    return Option.some(new InvalidTimeout({ jobType, timeoutMs }))
  }
  if (!isPriority(priority)) {
    return Option.some(new InvalidPriority({ jobType, priority }))
  }
  if (!Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > maxRetriesLimit) {
    return Option.some(new InvalidMaxRetries({ jobType, maxRetries }))
  }
  if (!Number.isFinite(retryBackoff.delay) || retryBackoff.delay <= 0) {
    return Option.some(new InvalidRetryBackoff({ jobType, delayMs: retryBackoff.delay }))
  }
  const badMode = draft.credential.allowedModes.find((mode) => !credentialModes.includes(mode))
  if (badMode !== undefined) return Option.some(new CredentialModeNotAllowed({ jobType, mode: badMode }))
  if (!draft.credential.allowedModes.includes(draft.credential.defaultMode)) {
    return Option.some(new CredentialModeNotAllowed({ jobType, mode: draft.credential.defaultMode }))
  }
  if (draft.projector !== undefined && !projectorKeys.includes(draft.projector)) {
    return Option.some(new UnknownProjector({ jobType, projector: draft.projector }))
  }
  return Option.none()
}

const malformed = (error: { readonly message: string }) => new MalformedJobDefinition({ message: error.message })

/** An empty registry; needs the `ResultProjectors` a definition's `projector` must name. */
export const makeJobDefinitionRegistry = Effect.gen(function*() {
  const projectors = yield* ResultProjectors
  const registered = yield* Ref.make(HashMap.empty<string, RegisteredJobType>())

  const register = (spec: JobTypeSpec): Effect.Effect<RegisteredJobType, JobDefinitionError> =>
    Effect.gen(function*() {
      const draft = yield* Schema.decodeUnknown(JobDefinitionDraft)(spec.definition).pipe(
        Effect.mapError((error) => new MalformedJobDefinition({ message: formatProblems(error).join("; ") }))
      )
      const broken = checkRules(draft, projectors.keys)
      if (Option.isSome(broken)) return yield* Effect.fail(broken.value)
      const definition = yield* Schema.decodeUnknown(JobDefinition)(draft).pipe(Effect.mapError(malformed))
      const entry: RegisteredJobType = {
        definition,
        decodeInput: spec.decodeInput,
        decodeOutput: spec.decodeOutput,
        promptVersion: spec.promptVersion,
        outputJsonSchema: spec.outputJsonSchema
      }
      return yield* Ref.modify(registered, (map) =>
        HashMap.has(map, definition.jobType)
          ? [Option.none<RegisteredJobType>(), map]
          : [Option.some(entry), HashMap.set(map, definition.jobType, entry)]).pipe(
          Effect.flatMap(
            Option.match({
              onNone: () => Effect.fail(new DuplicateJobDefinition({ jobType: definition.jobType })),
              onSome: Effect.succeed
            })
          )
        )
    })

  const get = (jobType: string) =>
    Ref.get(registered).pipe(
      Effect.map(HashMap.get(jobType)),
      Effect.flatMap(
        Option.match({
          onNone: () => Effect.fail(new UnknownJobType({ jobType })),
          onSome: Effect.succeed
        })
      )
    )

  const getAll: Effect.Effect<ReadonlyArray<RegisteredJobType>> = Ref.get(registered).pipe(
    Effect.map((map) => Array.from(HashMap.values(map)))
  )

  return {
    /** Fails with the first broken rule's own error. */
    register,
    get: (jobType: string): Effect.Effect<RegisteredJobType, UnknownJobType> => get(jobType),
    getAll
  }
})

/**
 * Job type → definition, instead of a switch over job types (docs/architecture.md §16.2).
 * `Default` is empty; `withSpecs` is the registry of a catalog.
 */
export class JobDefinitionRegistry
  extends Effect.Service<JobDefinitionRegistry>()("ai-job-engine/JobDefinitionRegistry", {
    effect: makeJobDefinitionRegistry
  })
{
  /** A registry holding `specs`; a spec that breaks a rule fails the layer with that rule's error. */
  static readonly withSpecs = (specs: ReadonlyArray<JobTypeSpec>) =>
    Layer.effect(
      JobDefinitionRegistry,
      Effect.gen(function*() {
        const registry = yield* makeJobDefinitionRegistry
        yield* Effect.forEach(specs, registry.register, { discard: true })
        return JobDefinitionRegistry.make(registry)
      })
    )
}
