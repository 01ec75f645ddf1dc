import { Effect, Option } from "effect"
import type { AiJob, JobListFilter } from "../../domain/AiJob.js"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { ArtifactRepository, type StoredArtifact } from "../../services/ArtifactRepository.js"
import { jobNotFound, type PlatformUnavailable } from "../ApiErrors.js"
import type { JobCursor } from "../ApiSchemas.js"
import type { AuthenticatedUser } from "../AuthTokens.js"
import { fromPersistence } from "../errorMapping.js"
import { cursorAfter } from "../presenters.js"

/** Reading jobs for the API: visibility, artifacts and keyset pages. */
export const makeJobViews = Effect.gen(function*() {
  const lifecycle = yield* AiJobLifecycleRepository
  const artifactRepository = yield* ArtifactRepository

  const find = (jobId: string) =>
    lifecycle.findById(jobId).pipe(
      Effect.catchTag("PersistenceError", fromPersistence),
      Effect.flatMap(Option.match({ onNone: () => Effect.fail(jobNotFound()), onSome: Effect.succeed }))
    )

  /**
   * The job if `user` may see it: its owner always, a SUPER_ADMIN when `admins` is true.
   * Someone else's job is JOB_NOT_FOUND, exactly like a missing one (no existence leak).
   */
  const findVisible = (jobId: string, user: AuthenticatedUser, options: { readonly admins: boolean }) =>
    Effect.flatMap(find(jobId), (job) =>
      job.userId === user.userId || (options.admins && user.role === "SUPER_ADMIN")
        ? Effect.succeed(job)
        : Effect.fail(jobNotFound()))

  /** The status read: the visible job and its artifacts in one round trip. */
  const findVisibleWithArtifacts = (jobId: string, user: AuthenticatedUser, options: { readonly admins: boolean }) =>
    artifactRepository.findJobWithArtifacts(jobId).pipe(
      Effect.catchTag("PersistenceError", fromPersistence),
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(jobNotFound()),
        onSome: (found) =>
          found.job.userId === user.userId || (options.admins && user.role === "SUPER_ADMIN")
            ? Effect.succeed(found)
            : Effect.fail(jobNotFound())
      }))
    )

  /** A succeeded job's artifacts (ordinal order); nothing for the others. */
  const artifactsOf = (job: AiJob): Effect.Effect<ReadonlyArray<StoredArtifact>, PlatformUnavailable> =>
    job.lifecycleStatus === "succeeded"
      ? artifactRepository.listByJob(job.id).pipe(Effect.catchTag("PersistenceError", fromPersistence))
      : Effect.succeed([])

  /** One page, newest first: asks for one more than `limit` to know whether a next page exists. */
  const page = <A>(
    filter: JobListFilter,
    params: { readonly cursor?: JobCursor | undefined; readonly limit: number },
    present: (job: AiJob) => Effect.Effect<A, PlatformUnavailable>
  ) =>
    Effect.gen(function*() {
      const rows = yield* lifecycle
        .list(filter, { after: params.cursor, limit: params.limit + 1 })
        .pipe(Effect.catchTag("PersistenceError", fromPersistence))
      const items = rows.slice(0, params.limit)
      const last = items[items.length - 1]
      const nextCursor = rows.length > params.limit && last !== undefined ? yield* cursorAfter(last) : null
      return { items: yield* Effect.forEach(items, present, { concurrency: 4 }), nextCursor }
    })

  return { find, findVisible, findVisibleWithArtifacts, artifactsOf, page }
})

export type JobViews = Effect.Effect.Success<typeof makeJobViews>
