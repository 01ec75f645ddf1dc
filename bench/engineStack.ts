import { NodeContext } from "@effect/platform-node"
import { ConfigProvider, Duration, Effect, Layer } from "effect"
import { allQueueNames } from "../src/domain/QueueName.js"
import { SyntheticGatewayLayer } from "../src/layers/gateway/SyntheticGateway.js"
import { ConfigLive, engineServices, LiveInfrastructure } from "../src/main/AppLayers.js"
import { makeDispatcher } from "../src/pipeline/outbox/dispatcher.js"
import { runWorker } from "../src/pipeline/worker.js"
import type { BenchTarget } from "./infra.js"

/** The JWT secret of the bench's API server (the bench signs its own tokens with it). */
export const benchJwtSecret = "bench-jwt-secret-0123456789abcdefghijklmnopqrstuvwxyz"

/**
 * The "environment" of a bench process, as the engine's own `Config` reads it: the scratch
 * database, the bench's Redis prefix, a platform key (synthetic_echo runs on `platform_key`),
 * worker concurrency, and quotas high enough that admission never refuses a bench job.
 */
export const benchConfigProvider = (target: BenchTarget, options: { readonly workerConcurrency: number }) =>
  ConfigProvider.fromMap(
    new Map([
      ["DATABASE_URL", target.databaseUrl],
      ["REDIS_URL", target.redisUrl],
      ["REDIS_KEY_PREFIX", target.redisPrefix],
      ["AI_API_KEY", "sk-bench-platform-key"],
      ["AUTH_JWT_SECRET", benchJwtSecret],
      ["WORKER_CONCURRENCY_INTERACTIVE", String(options.workerConcurrency)],
      ["WORKER_CONCURRENCY_BACKGROUND", String(options.workerConcurrency)],
      ["MAX_ACTIVE_JOBS_PER_USER", "1000000"],
      ["DAILY_JOB_QUOTA", "1000000"]
    ])
  )

/**
 * The production composition (`LiveStack` of src/main/AppLayers.ts: `ConfigLive`,
 * `LiveInfrastructure` = MySQL + BullMQ + Redis signals, the engine's services) with one swap:
 * the gateway is the instant synthetic provider (`latencyMs: 0`) instead of the one chosen by
 * `AI_GATEWAY`.
 */
export const benchEngineLayer = (target: BenchTarget, options: { readonly workerConcurrency: number }) =>
  engineServices(SyntheticGatewayLayer({ seed: "bench", latency: Duration.zero })).pipe(
    Layer.provideMerge(LiveInfrastructure),
    Layer.provideMerge(Layer.merge(ConfigLive, NodeContext.layer)),
    Layer.provide(Layer.setConfigProvider(benchConfigProvider(target, options)))
  )

/** The real dispatcher (its background loops) and one worker on every queue, in the caller's scope. */
export const startDispatcherAndWorker = (workerId: string) =>
  Effect.gen(function*() {
    const dispatcher = yield* makeDispatcher
    yield* dispatcher.run
    return yield* runWorker({ workerId, queues: allQueueNames })
  })
