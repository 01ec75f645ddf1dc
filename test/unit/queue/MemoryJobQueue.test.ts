import { Duration, Effect, Layer } from "effect"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import { MemoryJobQueueControl, MemoryJobQueueLive } from "../../../src/layers/memory/MemoryJobQueue.js"
import { jobQueueContract, JobQueueTestKit } from "../../contract/JobQueue.contract.js"

const settings = QueueSettings.make({
  queues: {
    "ai-interactive": { backoffDelay: Duration.millis(50) },
    "ai-background": { backoffDelay: Duration.millis(50) }
  },
  shutdownGrace: Duration.millis(2_000)
})

const queue = MemoryJobQueueLive.pipe(Layer.provide(settings))

const kit = Layer.effect(
  JobQueueTestKit,
  Effect.map(MemoryJobQueueControl, (control) => JobQueueTestKit.of({ addRaw: control.addRaw }))
).pipe(Layer.provideMerge(queue))

jobQueueContract("memory", kit)
