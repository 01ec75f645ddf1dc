import { type Array as Arr, Data, type Option } from "effect"
import type { AiJob, JobLease } from "../domain/AiJob.js"
import type { ExecutionError } from "../domain/ExecutionError.js"
import type { JobSnapshot } from "../domain/JobSnapshot.js"
import type { ResolvedCredential } from "../services/AiGateway.js"
import type { RegisteredJobType } from "../services/JobDefinitionRegistry.js"
import type { ModelRoute, RouteTarget } from "../services/ModelRouter.js"
import type { NewUsageLogEntry } from "../services/UsageLog.js"

/** After PREPARE: the job, locked by this worker, with its definition. */
export interface PreparedJob {
  readonly job: AiJob
  readonly lease: JobLease
  readonly registered: RegisteredJobType
  /** The input snapshot, read with the lock (none once it expired or was never written). */
  readonly snapshot: Option.Option<JobSnapshot>
}

/** A target of the route with the key this job presents to its provider. */
export interface ResolvedTarget extends RouteTarget {
  readonly credential: ResolvedCredential
}

/** After RESOLVE: what the provider call needs. */
export interface ResolvedJob extends PreparedJob {
  /** The snapshot's (validated, redacted) input. */
  readonly content: unknown
  readonly credential: ResolvedCredential
  readonly route: ModelRoute
  /** The route's targets this job holds a key for, in order: a user's key is presented only to its own provider. */
  readonly targets: Arr.NonEmptyReadonlyArray<ResolvedTarget>
}

/** After EXECUTE: the validated output, its hash, and the usage row of the call that made it. */
export interface ExecutedJob extends ResolvedJob {
  readonly output: unknown
  readonly outputHash: string
  readonly usage: NewUsageLogEntry
}

/** The stages, as logs and progress name them (docs/architecture.md §8). */
export type Stage = "PREPARE" | "RESOLVE" | "EXECUTE" | "PROJECT" | "COMPLETE"

/**
 * How a run ended, which COMPLETE records: by itself (succeeded, failed) or stopped from outside
 * (a cancel, the lease lost, the worker handing the job back).
 */
export type RunOutcome = Data.TaggedEnum<{
  /** PROJECT committed the result: the job as `markSucceeded` left it. */
  Succeeded: { readonly job: AiJob }
  /** An error the retry schedule gave up on, after `calls` provider calls under this lease. */
  Failed: { readonly error: ExecutionError; readonly calls: number }
  CancelRequested: {}
  LockLost: {}
  HandedOff: {}
}>
export const RunOutcome = Data.taggedEnum<RunOutcome>()
