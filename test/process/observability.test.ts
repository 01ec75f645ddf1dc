import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option, Schedule } from "effect"
import { type ReceivedSpan, startOtlpReceiver } from "../support/otlpReceiver.js"
import { type MetricFamily, parsePrometheusText, sampleValue, sumOf } from "../support/prometheusParser.js"
import { newWebhookSecret, startWebhookReceiver } from "../support/webhookReceiver.js"
import { freePort } from "./support/childProcess.js"
import {
  createJob,
  dispatcherStarted,
  engineEnv,
  engineStorage,
  flashcardRequest,
  httpRequest,
  pollJob,
  startProgram,
  tokenFor,
  workerStarted
} from "./support/engine.js"

const jobs = 3
const secretInput = "SECRET-INPUT-5e1d: chlorophyll absorbs light and plants release oxygen."
const providerKey = "sk-observability-key-never-exported-0123"
const metricsToken = "metrics-token-for-the-test-0123456789abcdef"

/** Every string an attribute or event attribute holds, for the "no input, no key" check. */
const attributeStrings = (span: ReceivedSpan): ReadonlyArray<string> =>
  [span.attributes, ...span.events.map((event) => event.attributes)].flatMap((attributes) =>
    Object.values(attributes).flatMap((value) => (Array.isArray(value) ? value.map(String) : [String(value)]))
  )

const stageSpans = [
  "pipeline.prepare",
  "pipeline.resolve",
  "pipeline.execute",
  "pipeline.project",
  "pipeline.complete",
  "provider.chat"
]

/**
 * The spans of one job's trace once every stage of its run, its provider call and the queue add
 * (`publish`: the dispatcher's, or the creator's own) arrived.
 */
const traceOfJob = (jobId: string, publish = "dispatcher.publish") => (spans: ReadonlyArray<ReceivedSpan>) => {
  const run = spans.find((span) => span.name === "pipeline.run" && span.attributes["ai_job.id"] === jobId)
  if (run === undefined) return Option.none()
  const trace = spans.filter((span) => span.traceId === run.traceId)
  const wanted = ["http.server POST", publish, ...stageSpans]
  return wanted.every((name) => trace.some((span) => span.name === name)) ? Option.some(trace) : Option.none()
}

const scrape = (url: string, token?: string) =>
  Effect.gen(function*() {
    const response = yield* httpRequest("GET", url, token === undefined ? {} : { token })
    expect(response.status, response.text).toBe(200)
    return parsePrometheusText(response.text)
  })

/** Scrapes `url` every 100 ms until `done` holds of what it shows. */
const scrapeUntil = (
  url: string,
  done: (families: ReadonlyArray<MetricFamily>) => boolean,
  timeout: Duration.DurationInput
) =>
  scrape(url).pipe(
    Effect.repeat(Schedule.recurUntil(done).pipe(Schedule.addDelay(() => Duration.millis(100)))),
    Effect.timeoutFail({ duration: timeout, onTimeout: () => `${url} did not show the awaited values in time` }),
    Effect.orDie
  )

describe("issue 15: one trace per job across processes, Prometheus metrics", () => {
  it.live("API, dispatcher and worker export one trace per job over OTLP/HTTP JSON; /metrics counts every job", () =>
    Effect.gen(function*() {
      const receiver = yield* startOtlpReceiver
      const storage = yield* engineStorage("observability")
      const [workerMetricsPort, dispatcherMetricsPort] = yield* Effect.all([freePort, freePort])
      const env = engineEnv(storage, {
        AI_API_KEY: providerKey,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "200",
        METRICS_TOKEN: metricsToken,
        LOG_FORMAT: "json",
        // Dispatcher-only mode: the API never adds to the queues, so the dispatcher's publish runs.
        OUTBOX_DIRECT_PUBLISH: "false"
      })
      const [api, worker, dispatcher] = yield* Effect.all(
        [
          startProgram("api", "api", env),
          startProgram("worker", "worker", { ...env, METRICS_PORT: String(workerMetricsPort) }, {
            ready: workerStarted
          }),
          startProgram("dispatcher", "dispatcher", { ...env, METRICS_PORT: String(dispatcherMetricsPort) }, {
            ready: dispatcherStarted
          })
        ],
        { concurrency: "unbounded" }
      )
      const token = yield* tokenFor(storage, "observability-user")
      const first = yield* createJob(api.baseUrl, token, "flashcard-generations", { sourceText: secretInput, count: 2 })
      const others = yield* Effect.forEach(
        Array.from({ length: jobs - 1 }, (_, i) => i),
        (i) => createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(i))
      )
      for (const job of [first, ...others]) {
        const done = yield* pollJob(api.baseUrl, token, job.jobId, { timeout: Duration.seconds(30) })
        expect(done.lifecycleStatus).toBe("succeeded")
      }

      // One trace: the create request, the dispatcher's publish, the worker's run and every stage.
      const trace = yield* receiver.waitFor(traceOfJob(first.jobId), Duration.seconds(20))
      const byName = (name: string) => trace.filter((span) => span.name === name)
      const request = byName("http.server POST")
      expect(request.map((span) => span.service)).toEqual(["ai-job-engine-api"])
      expect(request[0]?.parentSpanId).toBeUndefined()
      expect(byName("dispatcher.publish").map((span) => span.service)).toEqual(["ai-job-engine-dispatcher"])
      expect(byName("pipeline.run").map((span) => span.service)).toEqual(["ai-job-engine-worker"])
      for (const stage of ["prepare", "resolve", "execute", "project", "complete"]) {
        expect(byName(`pipeline.${stage}`).length, stage).toBe(1)
      }
      // The provider call is a child of EXECUTE and carries the GenAI token counts.
      const execute = byName("pipeline.execute")[0]
      const call = byName("provider.chat")
      expect(call).toHaveLength(1)
      expect(call[0]?.parentSpanId).toBe(execute?.spanId)
      expect(call[0]?.attributes["gen_ai.system"]).toBe("deepseek")
      expect(call[0]?.attributes["gen_ai.request.model"]).toEqual(expect.any(String))
      expect(call[0]?.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0)
      expect(call[0]?.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0)
      expect(receiver.rejected()).toEqual([])
      // One waterfall: every span but the request's names a parent that was exported (the sql.*
      // spans are not exported by default, so nothing may hang off them).
      const spanIds = new Set(trace.map((span) => span.spanId))
      expect(
        trace.filter((span) => span.parentSpanId !== undefined && !spanIds.has(span.parentSpanId)).map((span) =>
          span.name
        )
      ).toEqual([])
      expect(trace.filter((span) => span.name.startsWith("sql.")).map((span) => span.name)).toEqual([])

      // Nothing exported anywhere holds the job's input or the provider key.
      const leaks = receiver.spans().flatMap((span) =>
        attributeStrings(span).filter((value) => value.includes("SECRET-INPUT-5e1d") || value.includes(providerKey))
          .map((value) => `${span.name}: ${value}`)
      )
      expect(leaks).toEqual([])

      // Metrics: the API counts creates and requests (admin-protected on PORT), the worker
      // finishes and durations, the dispatcher the outbox.
      expect((yield* httpRequest("GET", `${api.baseUrl}/metrics`)).status).toBe(401)
      const apiMetrics = yield* scrape(`${api.baseUrl}/metrics`, yield* tokenFor(storage, "ops", "SUPER_ADMIN"))
      expect(sampleValue(apiMetrics, "ai_jobs_created_total", { job_type: "flashcard_generation" })).toBe(jobs)
      expect(sampleValue(apiMetrics, "http_server_request_duration_seconds_count", {
        method: "POST",
        route: "/api/ai/flashcard-generations",
        status: "202"
      })).toBe(jobs)
      const workerMetrics = yield* scrape(`http://127.0.0.1:${workerMetricsPort}/metrics`, metricsToken)
      expect(
        sampleValue(workerMetrics, "ai_jobs_finished_total", {
          job_type: "flashcard_generation",
          status: "succeeded",
          error_code: "none"
        })
      ).toBe(jobs)
      expect(sampleValue(workerMetrics, "ai_job_duration_seconds_count", { job_type: "flashcard_generation" })).toBe(
        jobs
      )
      expect(sumOf(workerMetrics, "ai_pipeline_stage_duration_seconds_count", { stage: "execute" })).toBe(jobs)
      expect(sumOf(workerMetrics, "ai_provider_tokens_total", { direction: "output" })).toBeGreaterThan(0)
      const dispatcherMetrics = yield* scrape(`http://127.0.0.1:${dispatcherMetricsPort}/metrics`, metricsToken)
      expect(sampleValue(dispatcherMetrics, "ai_outbox_pending")).toBe(0)
      expect(sampleValue(dispatcherMetrics, "ai_outbox_dead")).toBe(0)
      expect(sampleValue(dispatcherMetrics, "ai_outbox_oldest_pending_age_seconds")).toBe(0)
      expect(sampleValue(dispatcherMetrics, "ai_outbox_dispatch_latency_seconds_count")).toBe(jobs)
      expect((yield* httpRequest("GET", `http://127.0.0.1:${workerMetricsPort}/healthz`)).status).toBe(200)

      yield* Effect.all([api.signal("SIGTERM"), worker.signal("SIGTERM"), dispatcher.signal("SIGTERM")])
      for (const program of [api, worker, dispatcher]) {
        expect(yield* program.awaitExit(Duration.seconds(15)), program.tail()).toEqual({ code: 0, signal: null })
      }
    }).pipe(Effect.scoped))

  it.live("with the creator's own queue add (the default), the API's outbox.publish joins the job's one trace between the request and the stages", () =>
    Effect.gen(function*() {
      const receiver = yield* startOtlpReceiver
      const storage = yield* engineStorage("observability_direct")
      const env = engineEnv(storage, {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "200"
      })
      const [api, worker, dispatcher] = yield* Effect.all(
        [
          startProgram("api", "api", env),
          startProgram("worker", "worker", env, { ready: workerStarted }),
          startProgram("dispatcher", "dispatcher", env, { ready: dispatcherStarted })
        ],
        { concurrency: "unbounded" }
      )
      const token = yield* tokenFor(storage, "observability-direct-user")
      const job = yield* createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(0))
      const done = yield* pollJob(api.baseUrl, token, job.jobId, { timeout: Duration.seconds(30) })
      expect(done.lifecycleStatus).toBe("succeeded")

      const trace = yield* receiver.waitFor(traceOfJob(job.jobId, "outbox.publish"), Duration.seconds(20))
      const byName = (name: string) => trace.filter((span) => span.name === name)
      const [request] = byName("http.server POST")
      expect(request?.service).toBe("ai-job-engine-api")
      expect(request?.parentSpanId).toBeUndefined()
      // The add ran in the creating process, under the job's stored context; no dispatcher added it.
      const publish = byName("outbox.publish")
      expect(publish.map((span) => span.service)).toEqual(["ai-job-engine-api"])
      expect(publish[0]?.attributes["ai_job.id"]).toBe(job.jobId)
      expect(byName("dispatcher.publish")).toEqual([])
      expect(byName("pipeline.run").map((span) => span.service)).toEqual(["ai-job-engine-worker"])
      for (const name of stageSpans) expect(byName(name).length, name).toBe(1)
      // One trace id from the request to the last stage, and one waterfall: every parent was exported.
      expect(new Set(trace.map((span) => span.traceId))).toEqual(new Set([request?.traceId]))
      const spanIds = new Set(trace.map((span) => span.spanId))
      expect(
        trace.filter((span) => span.parentSpanId !== undefined && !spanIds.has(span.parentSpanId)).map((span) =>
          span.name
        )
      ).toEqual([])
      expect(receiver.rejected()).toEqual([])

      yield* Effect.all([api.signal("SIGTERM"), worker.signal("SIGTERM"), dispatcher.signal("SIGTERM")])
      for (const program of [api, worker, dispatcher]) {
        expect(yield* program.awaitExit(Duration.seconds(15)), program.tail()).toEqual({ code: 0, signal: null })
      }
    }).pipe(Effect.scoped))
  it.live("completion events awaiting delivery are ai_events_*, apart from the job dispatch backlog ai_outbox_*", () =>
    Effect.gen(function*() {
      const secret = newWebhookSecret()
      // The endpoint refuses every delivery until it is told to accept.
      let accepting = false
      const endpoint = yield* startWebhookReceiver({ secret, answer: () => (accepting ? 204 : 503) })
      const storage = yield* engineStorage("observability_lanes")
      const dispatcherMetricsPort = yield* freePort
      const env = engineEnv(storage, {
        WEBHOOK_URL: endpoint.url(),
        WEBHOOK_SECRET: secret,
        EVENT_RETRY_BASE_MS: "500",
        EVENT_RETRY_MAX_MS: "500"
      })
      const [api, worker, dispatcher] = yield* Effect.all(
        [
          startProgram("api", "api", env),
          startProgram("worker", "worker", env, { ready: workerStarted }),
          startProgram("dispatcher", "dispatcher", { ...env, METRICS_PORT: String(dispatcherMetricsPort) }, {
            ready: dispatcherStarted
          })
        ],
        { concurrency: "unbounded" }
      )
      const token = yield* tokenFor(storage, "observability-lanes-user")
      const created = yield* Effect.forEach(
        [0, 1],
        (i) => createJob(api.baseUrl, token, "flashcard-generations", flashcardRequest(i))
      )
      for (const job of created) {
        expect((yield* pollJob(api.baseUrl, token, job.jobId, { timeout: Duration.seconds(30) })).lifecycleStatus).toBe(
          "succeeded"
        )
      }
      // Each job's terminal event was offered and refused: both wait for another round.
      yield* endpoint.waitFor(
        (deliveries) => new Set(deliveries.map((delivery) => delivery.webhookId)).size === created.length,
        Duration.seconds(20)
      )

      const metricsUrl = `http://127.0.0.1:${dispatcherMetricsPort}/metrics`
      // The jobs' enqueue events are published (the creator marks its own adds within
      // OUTBOX_DIRECT_FLUSH_MS) while their completion events still wait.
      const backedUp = yield* scrapeUntil(
        metricsUrl,
        (families) => sampleValue(families, "ai_outbox_pending") === 0,
        Duration.seconds(10)
      )
      expect(sampleValue(backedUp, "ai_outbox_dead")).toBe(0)
      expect(sampleValue(backedUp, "ai_outbox_oldest_pending_age_seconds")).toBe(0)
      expect(sampleValue(backedUp, "ai_events_pending")).toBe(created.length)
      expect(sampleValue(backedUp, "ai_events_dead")).toBe(0)
      expect(sampleValue(backedUp, "ai_events_oldest_pending_age_seconds")).toBeGreaterThan(0)

      // The endpoint comes back: the next round delivers both and the events' backlog empties.
      accepting = true
      const delivered = yield* scrapeUntil(
        metricsUrl,
        (families) => sampleValue(families, "ai_events_pending") === 0,
        Duration.seconds(20)
      )
      expect(sampleValue(delivered, "ai_events_dead")).toBe(0)
      expect(sampleValue(delivered, "ai_events_oldest_pending_age_seconds")).toBe(0)
      expect(sampleValue(delivered, "ai_outbox_pending")).toBe(0)
      expect(
        new Set(
          endpoint.deliveries().filter((delivery) => delivery.status === 204).map((delivery) => delivery.webhookId)
        ).size
      ).toBe(created.length)

      yield* Effect.all([api.signal("SIGTERM"), worker.signal("SIGTERM"), dispatcher.signal("SIGTERM")])
      for (const program of [api, worker, dispatcher]) {
        expect(yield* program.awaitExit(Duration.seconds(15)), program.tail()).toEqual({ code: 0, signal: null })
      }
    }).pipe(Effect.scoped))
})
