import { Effect, Option } from "effect"
import type { JobEvent } from "../../src/domain/JobEvent.js"
import { AiJobLifecycleRepository } from "../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../src/services/AiJobService.js"
import { JobEvents } from "../../src/services/JobEvents.js"
import { memoryEngineStack } from "./engineStack.js"

/** A `synthetic_echo` job of `user-1`, created as the API creates it. */
export const createEcho = (message: string) =>
  Effect.flatMap(
    AiJobService,
    (service) =>
      service.createJob({
        userId: "user-1",
        jobType: "synthetic_echo",
        targetType: "test",
        targetId: "t",
        input: { message }
      })
  ).pipe(
    Effect.map(({ job }) => job)
  )

/** The job's row as stored now. */
export const jobNow = (jobId: string) =>
  Effect.flatMap(AiJobLifecycleRepository, (jobs) => Effect.map(jobs.findById(jobId), Option.getOrThrow))

/** Runs a test on a fresh memory engine, keeping every job event published. */
export const withEvents = <A, E, R>(body: (published: ReadonlyArray<JobEvent>) => Effect.Effect<A, E, R>) => {
  const published: Array<JobEvent> = []
  return body(published).pipe(
    Effect.updateService(JobEvents, (events) => ({
      ...events,
      publish: (event: JobEvent) => Effect.zipRight(Effect.sync(() => published.push(event)), events.publish(event))
    })),
    Effect.provide(memoryEngineStack())
  )
}
