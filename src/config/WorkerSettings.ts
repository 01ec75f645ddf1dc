import { Config, Context, Effect, Layer, Option } from "effect"
import { hostname } from "node:os"
import { newId } from "../domain/Ids.js"
import { allQueueNames, type QueueName } from "../domain/QueueName.js"

/** `WORKER_QUEUES`: the queues this process serves, comma-separated (default both). */
export const workerQueuesConfig = Config.string("WORKER_QUEUES").pipe(
  Config.withDefault(allQueueNames.join(",")),
  Config.validate({
    message: `WORKER_QUEUES must name one or more of ${allQueueNames.join(", ")}, comma-separated`,
    validation: (value) => {
      const names = value.split(",").map((name) => name.trim()).filter((name) => name.length > 0)
      return names.length > 0 && names.every((name) => allQueueNames.some((known) => known === name))
    }
  }),
  Config.map((value) => allQueueNames.filter((known) => value.split(",").map((name) => name.trim()).includes(known)))
)

/** `WORKER_ID`, or `worker-{host}-{pid}-{random}`: the lock owner this process writes. */
export const workerIdFromConfig = Effect.gen(function*() {
  const configured = yield* Config.option(Config.nonEmptyString("WORKER_ID"))
  if (Option.isSome(configured)) return configured.value
  return `worker-${hostname()}-${process.pid}-${(yield* newId).slice(-12)}`
})

/**
 * `WORKER_HEAP_GROWTH_PERCENT` (default 50; 0 leaves V8's policy): how far the old generation may
 * grow past the live set before the next full GC. Jobs live for seconds and die in the old
 * generation; V8's default (up to 4×) kept a worker with 500 jobs at 550–880 MB RSS for ~120 MB
 * live, 50 % keeps it near 300 MB.
 */
export const heapGrowthPercentConfig = Config.integer("WORKER_HEAP_GROWTH_PERCENT").pipe(
  Config.withDefault(50),
  Config.validate({
    message: "WORKER_HEAP_GROWTH_PERCENT must be a whole number from 10 to 300, or 0 for V8's own policy",
    validation: (n) => n === 0 || (n >= 10 && n <= 300)
  })
)

export class WorkerSettings extends Context.Tag("ai-job-engine/WorkerSettings")<
  WorkerSettings,
  {
    readonly workerId: string
    readonly queues: ReadonlyArray<QueueName>
    readonly heapGrowthPercent: number
  }
>() {
  static readonly config = Effect.all({
    workerId: workerIdFromConfig,
    queues: workerQueuesConfig,
    heapGrowthPercent: heapGrowthPercentConfig
  })
  static readonly layer = Layer.effect(WorkerSettings, WorkerSettings.config)
}
