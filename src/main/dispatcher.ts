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
import { DispatcherInfrastructure, DispatcherPart } from "./AppLayers.js"
import { requireStorage, runProcess } from "./runProcess.js"

runProcess(
  "dispatcher",
  DispatcherPart.pipe(Layer.provide(DispatcherInfrastructure), Layer.provide(requireStorage("the dispatcher")))
)
