import { Clock, Effect, HashMap, Layer, Ref } from "effect"
import { WorkerDirectory, type WorkerHeartbeat } from "../../services/WorkerDirectory.js"

export const workerHeartbeatTtlMs = 90_000

/** Heartbeats in memory, expiring 90 s after the last beat by Effect's Clock. */
export const MemoryWorkerDirectory = Layer.effect(
  WorkerDirectory,
  Effect.gen(function*() {
    const entries = yield* Ref.make(
      HashMap.empty<string, { readonly heartbeat: WorkerHeartbeat; readonly expiresAt: number }>()
    )
    return WorkerDirectory.of({
      beat: (heartbeat) =>
        Effect.flatMap(
          Clock.currentTimeMillis,
          (now) =>
            Ref.update(entries, HashMap.set(heartbeat.instanceId, { heartbeat, expiresAt: now + workerHeartbeatTtlMs }))
        ),
      remove: (instanceId) => Ref.update(entries, HashMap.remove(instanceId)),
      live: Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const all = yield* Ref.get(entries)
        return Array.from(HashMap.values(all))
          .filter((entry) => entry.expiresAt > now)
          .map((entry) => entry.heartbeat)
          .sort((a, b) => a.instanceId.localeCompare(b.instanceId))
      })
    })
  })
)
