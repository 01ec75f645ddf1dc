/**
 * `npx tsx bench/workerEngineCpu.ts`: the worker's engine alone (with its lease keeper and directory beats), in one process on the memory
 * layers and the instant synthetic provider: rounds of `WORKER_CPU_JOBS` queued flashcard jobs,
 * each handed to `engine.run` as a queue delivery (`WORKER_CPU_CONCURRENCY` at once), the process's
 * CPU counted while they run (creating them is not). Prints the median CPU per job over
 * `WORKER_CPU_ROUNDS` rounds after one warm-up round. It leaves out BullMQ, MySQL, Redis and
 * logging (lines are dropped), so what it measures is mostly the engine's own Effect work per job:
 * run it before and after a change in src/pipeline, in turn, and compare the medians. With
 * `node --cpu-prof` (e.g. `NODE_OPTIONS=--cpu-prof`) its profile reads with `cpuProfileSummary.ts`.
 */
import { Config, Effect, Layer, Logger, Option, RuntimeFlags, Supervisor, type Tracer } from "effect"
import { allQueueNames } from "../src/domain/QueueName.js"
import { runWorker } from "../src/pipeline/worker.js"
import { AiJobLifecycleRepository } from "../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../src/services/AiJobService.js"
import { payloadFor } from "../src/services/JobQueue.js"
import { flashcardRequest } from "../test/process/support/engine.js"
import { memoryEngineStack } from "../test/support/engineStack.js"
import { median, round } from "./stats.js"

const settings = Config.all({
  jobs: Config.integer("WORKER_CPU_JOBS").pipe(Config.withDefault(300)),
  rounds: Config.integer("WORKER_CPU_ROUNDS").pipe(Config.withDefault(7)),
  concurrency: Config.integer("WORKER_CPU_CONCURRENCY").pipe(Config.withDefault(64)),
  steps: Config.boolean("WORKER_CPU_STEPS").pipe(Config.withDefault(false))
})

/**
 * With `WORKER_CPU_STEPS=true`: the fiber steps (one per effect the runtime evaluates) and fibers
 * started while the jobs run, by the span their fiber is in, so a cut in steps shows where it was
 * made (the CPU figures are then not comparable: counting costs a call per step).
 */
class StepCounter extends Supervisor.AbstractSupervisor<void> {
  counting = false
  readonly steps = new Map<string, number>()
  fibers = 0
  readonly value = Effect.void
  override onStart() {
    if (this.counting) this.fibers++
  }
  override onEffect<A, E>(fiber: unknown, _effect: Effect.Effect<A, E>) {
    if (!this.counting) return
    // The runtime keeps the fiber's span on the fiber (not part of the public type).
    const span = (fiber as { readonly currentSpan?: Tracer.AnySpan }).currentSpan
    const name = span === undefined ? "(no span)" : span._tag === "Span" ? span.name : "(external span)"
    this.steps.set(name, (this.steps.get(name) ?? 0) + 1)
  }
}
const counter = new StepCounter()

/** One round on a fresh stack: the memory stores scan what they hold, so a store kept across rounds would slow each one. */
const oneRound = (s: Config.Config.Success<typeof settings>) =>
  Effect.gen(function*() {
    const service = yield* AiJobService
    const jobs = yield* AiJobLifecycleRepository
    // A worker on no queue: its engine, lease keeper and directory beats, fed by hand below.
    const engine = yield* runWorker({ workerId: "bench-worker", queues: [] })
    let created = 0
    const deliveries = yield* Effect.forEach(Array.from({ length: s.jobs }), () =>
      Effect.map(
        Effect.orDie(service.createJob({
          userId: `bench-user-${created % 64}`,
          jobType: "flashcard_generation",
          targetType: "deck",
          targetId: "bench",
          input: flashcardRequest(created++)
        })),
        ({ job }) => ({
          queueName: allQueueNames[0],
          queueJobId: job.id,
          payload: payloadFor({ jobId: job.id, jobType: job.jobType, createdAt: job.createdAt }),
          attempt: 1,
          maxAttempts: 3,
          signal: new AbortController().signal
        })
      ))
    counter.counting = s.steps
    const before = process.cpuUsage()
    const began = performance.now()
    yield* Effect.forEach(deliveries, (delivery) => Effect.ignore(engine.run(delivery)), {
      concurrency: s.concurrency,
      discard: true
    })
    const used = process.cpuUsage(before)
    counter.counting = false
    const wallMs = performance.now() - began
    const last = deliveries.at(-1)
    const status = last === undefined ? Option.none() : yield* Effect.orDie(jobs.findById(last.payload.jobId))
    if (Option.isSome(status) && status.value.lifecycleStatus !== "succeeded") {
      return yield* Effect.dieMessage(`a job ended ${status.value.lifecycleStatus}`)
    }
    return { cpuMsPerJob: (used.user + used.system) / 1000 / s.jobs, wallMs }
  }).pipe(Effect.scoped, Effect.provide(memoryEngineStack({ seed: "worker-cpu-bench" })))

const program = Effect.gen(function*() {
  const s = yield* settings
  yield* oneRound(s)
  const rounds = []
  for (let i = 0; i < s.rounds; i++) rounds.push(yield* oneRound(s))
  const cpu = rounds.map((r) => r.cpuMsPerJob)
  console.log(
    `worker engine (memory layers): ${s.jobs} jobs a round, ${s.concurrency} at once, ${s.rounds} rounds: ` +
      `CPU ms per job median ${round(median(cpu), 3)} (rounds ${cpu.map((c) => round(c, 3)).join(", ")}), ` +
      `wall ms a round median ${round(median(rounds.map((r) => r.wallMs)), 0)}`
  )
  if (s.steps) {
    const perJob = (n: number) => round(n / (s.jobs * s.rounds), 1)
    const total = [...counter.steps.values()].reduce((sum, n) => sum + n, 0)
    console.log(
      `fiber steps per job ${perJob(total)}, fibers started per job ${perJob(counter.fibers)}; steps by span:`
    )
    for (const [name, n] of [...counter.steps].sort((a, b) => b[1] - a[1])) console.log(`${perJob(n)}\t${name}`)
  }
})

Effect.runPromise(
  program.pipe(
    Effect.scoped,
    Effect.provide(memoryEngineStack({ seed: "worker-cpu-bench" })),
    Effect.provide(Logger.remove(Logger.defaultLogger)),
    Effect.provide(Layer.merge(Supervisor.addSupervisor(counter), RuntimeFlags.enableOpSupervision))
  )
).catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
