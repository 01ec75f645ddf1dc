import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, MetricBoundaries } from "effect"
import { prometheusText, renderPrometheus } from "../../../src/http/prometheusText.js"
import { increment, observe } from "../../../src/services/EngineMetrics.js"
import { parsePrometheusText, sampleValue, sumOf } from "../../support/prometheusParser.js"

describe("Prometheus text from Effect metrics", () => {
  it.effect("counters, gauges and histograms render as text a strict parser accepts, with their values", () =>
    Effect.gen(function*() {
      const created = Metric.counter("t_render_created_total", {
        description: "Jobs \"created\"\\n",
        incremental: true
      })
      const gauge = Metric.gauge("t_render_pending", { description: "Pending" })
      const hist = Metric.histogram("t_render_seconds", MetricBoundaries.fromIterable([0.1, 1, 10]), "Durations")
      yield* increment(created, { job_type: "flashcard_generation" }, 3)
      yield* increment(created, { job_type: "odd\"type\\with\nnewline" })
      yield* Metric.set(gauge, 7)
      for (const value of [0.05, 0.5, 0.5, 5, 50]) yield* observe(hist, { stage: "execute" }, value)

      const text = yield* prometheusText
      const families = parsePrometheusText(text)
      expect(families.find((f) => f.name === "t_render_created_total")?.type).toBe("counter")
      expect(sampleValue(families, "t_render_created_total", { job_type: "flashcard_generation" })).toBe(3)
      expect(sampleValue(families, "t_render_created_total", { job_type: "odd\"type\\with\nnewline" })).toBe(1)
      expect(sampleValue(families, "t_render_pending")).toBe(7)
      const h = families.find((f) => f.name === "t_render_seconds")
      expect(h?.type).toBe("histogram")
      expect(sampleValue(families, "t_render_seconds_bucket", { stage: "execute", le: "0.1" })).toBe(1)
      expect(sampleValue(families, "t_render_seconds_bucket", { stage: "execute", le: "1" })).toBe(3)
      expect(sampleValue(families, "t_render_seconds_bucket", { stage: "execute", le: "10" })).toBe(4)
      expect(sampleValue(families, "t_render_seconds_bucket", { stage: "execute", le: "+Inf" })).toBe(5)
      expect(sampleValue(families, "t_render_seconds_count", { stage: "execute" })).toBe(5)
      expect(sumOf(families, "t_render_seconds_sum")).toBeCloseTo(56.05)
    }))

  it("renders an empty snapshot as an empty document", () => {
    expect(parsePrometheusText(renderPrometheus([]))).toEqual([])
  })
})

describe("the strict Prometheus parser refuses malformed text", () => {
  const bad: ReadonlyArray<readonly [string, string]> = [
    ["bad metric name", "9metric 1\n"],
    ["bad label name", "m{9x=\"a\"} 1\n"],
    ["unquoted label value", "m{x=a} 1\n"],
    ["bad escape", "m{x=\"a\\t\"} 1\n"],
    ["missing value", "m{x=\"a\"}\n"],
    ["bad value", "m 1.2.3\n"],
    ["duplicate series", "m{x=\"a\"} 1\nm{x=\"a\"} 2\n"],
    ["TYPE after samples", "m 1\n# TYPE m counter\n"],
    ["family in two places", "# TYPE a counter\na 1\n# TYPE b counter\nb 1\na{x=\"1\"} 2\n"],
    ["unknown type", "# TYPE m thing\nm 1\n"],
    ["histogram without +Inf", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"],
    ["histogram count differs", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n"],
    [
      "histogram not cumulative",
      "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n"
    ],
    ["no final newline", "m 1"]
  ]
  for (const [what, text] of bad) {
    it(what, () => {
      expect(() => parsePrometheusText(text)).toThrow()
    })
  }

  it("accepts the format's own example", () => {
    const text = [
      "# HELP http_requests_total The total number of HTTP requests.",
      "# TYPE http_requests_total counter",
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000",
      "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000",
      "",
      "# A normal comment.",
      "metric_without_timestamp_and_labels 12.47",
      "# TYPE h histogram",
      "h_bucket{le=\"0.05\"} 24054",
      "h_bucket{le=\"+Inf\"} 144320",
      "h_sum 53423",
      "h_count 144320",
      ""
    ].join("\n")
    const families = parsePrometheusText(text)
    expect(sampleValue(families, "http_requests_total", { method: "post", code: "400" })).toBe(3)
    expect(families.map((f) => f.name)).toEqual(["http_requests_total", "metric_without_timestamp_and_labels", "h"])
  })
})
