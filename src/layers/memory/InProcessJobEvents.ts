import { Effect, Layer, PubSub } from "effect"
import type { JobEvent } from "../../domain/JobEvent.js"
import { JobEvents } from "../../services/JobEvents.js"

/**
 * Job events within one process: one topic per job with subscribers, dropped with its last one,
 * so a publish for a job nobody watches costs a map lookup.
 */
export const makeInProcessJobEvents = Effect.sync(() => {
  const topics = new Map<string, { readonly hub: PubSub.PubSub<JobEvent>; subscribers: number }>()

  const acquire = (jobId: string) =>
    Effect.flatMap(PubSub.unbounded<JobEvent>(), (fresh) =>
      Effect.sync(() => {
        const topic = topics.get(jobId) ?? { hub: fresh, subscribers: 0 }
        topic.subscribers += 1
        topics.set(jobId, topic)
        return topic
      }))

  const release = (jobId: string, topic: { readonly hub: PubSub.PubSub<JobEvent>; subscribers: number }) =>
    Effect.suspend(() => {
      topic.subscribers -= 1
      if (topic.subscribers > 0) return Effect.void
      topics.delete(jobId)
      return PubSub.shutdown(topic.hub)
    })

  return JobEvents.of({
    publish: (event) =>
      Effect.suspend(() => {
        const topic = topics.get(event.jobId)
        return topic === undefined ? Effect.void : Effect.asVoid(PubSub.publish(topic.hub, event))
      }),
    subscribe: (jobId) =>
      Effect.gen(function*() {
        const topic = yield* Effect.acquireRelease(acquire(jobId), (topic) => release(jobId, topic))
        return yield* PubSub.subscribe(topic.hub)
      })
  })
})

export const InProcessJobEvents = Layer.effect(JobEvents, makeInProcessJobEvents)
