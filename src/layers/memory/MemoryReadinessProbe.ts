import { Layer } from "effect"
import { makeReadinessProbe, memoryCheck, ReadinessProbe } from "../../services/ReadinessProbe.js"

/** The embedded engine: the memory store and in-process queues, always ready. */
export const ReadinessProbeMemory = Layer.succeed(
  ReadinessProbe,
  makeReadinessProbe([memoryCheck("database"), memoryCheck("queue")])
)
