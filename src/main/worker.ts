/**
 * `npm run start:worker`: a worker process (docs/architecture.md §7.4). Serves the queues in
 * `WORKER_QUEUES` (default both) from BullMQ on Redis (`REDIS_URL`), runs each job through the
 * pipeline against MySQL (`DATABASE_URL`), keeps `worker:heartbeat:{id}` alive in Redis, and runs
 * the lock reaper and snapshot cleanup.
 *
 * On SIGTERM or SIGINT it stops taking jobs, interrupts its running ones, releases their locks
 * so another worker takes them over at once, closes its connections and exits 0.
 */
import { Layer } from "effect"
import { MetricsListener } from "../http/metricsEndpoint.js"
import { sampleProviderBreakers } from "../services/ProviderCircuitBreaker.js"
import { LiveStack, WorkerPart } from "./AppLayers.js"
import { requireStorage, runProcess } from "./runProcess.js"

runProcess(
  "worker",
  Layer.merge(WorkerPart, MetricsListener(sampleProviderBreakers)).pipe(
    Layer.provide(LiveStack),
    Layer.provide(requireStorage("the worker"))
  )
)
