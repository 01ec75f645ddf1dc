/**
 * `npm run start:dispatcher`: the outbox dispatcher as its own process (docs/architecture.md §6).
 * Moves outbox events from MySQL (`DATABASE_URL`) into the BullMQ queues on Redis (`REDIS_URL`),
 * woken by Redis pub/sub after each create and polling every `OUTBOX_POLL_MS` as a safety net.
 * Run as many as you like: claims are compare-and-set, so each event is dispatched by one.
 *
 * On SIGTERM or SIGINT it finishes the batch it claimed, closes its queues and connections and
 * exits 0.
 */
import { Layer } from "effect"
import { MetricsListener } from "../http/metricsEndpoint.js"
import { sampleOutboxBacklog } from "../services/EngineMetrics.js"
import { DispatcherInfrastructure, DispatcherPart } from "./AppLayers.js"
import { requireStorage, runProcess } from "./runProcess.js"

runProcess(
  "dispatcher",
  // Beside the loop, `/metrics` on METRICS_PORT with the outbox backlog sampled per scrape.
  Layer.merge(DispatcherPart, MetricsListener(sampleOutboxBacklog)).pipe(
    Layer.provide(DispatcherInfrastructure),
    Layer.provide(requireStorage("the dispatcher"))
  )
)
