import { Effect, Metric, MetricPair, MetricState, Option } from "effect"

/**
 * Effect's metric snapshot as Prometheus text exposition format 0.0.4: one `# HELP` and
 * `# TYPE` per family, then its series; histograms as cumulative `_bucket{le}` series ending at
 * `+Inf`, `_sum` and `_count`. Counters, gauges and histograms only (the engine defines no other).
 */

export const prometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

const escapeLabelValue = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")
const escapeHelp = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const formatNumber = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "+Inf"
  if (value === Number.NEGATIVE_INFINITY) return "-Inf"
  return String(value)
}

type Labels = ReadonlyArray<readonly [string, string]>

const formatLabels = (labels: Labels) =>
  labels.length === 0 ? "" : `{${labels.map(([key, value]) => `${key}="${escapeLabelValue(value)}"`).join(",")}}`

interface Family {
  readonly name: string
  readonly type: "counter" | "gauge" | "histogram"
  readonly help: string
  readonly lines: Array<{ readonly sortKey: string; readonly text: string }>
}

const kindOf = (state: MetricState.MetricState.Untyped): Family["type"] | undefined =>
  MetricState.isCounterState(state)
    ? "counter"
    : MetricState.isGaugeState(state)
    ? "gauge"
    : MetricState.isHistogramState(state)
    ? "histogram"
    : undefined

const histogramLines = (name: string, labels: Labels, state: MetricState.MetricState.Histogram) => {
  const lines: Array<string> = []
  let sawInfinity = false
  for (const [bound, cumulative] of state.buckets) {
    if (bound === Number.POSITIVE_INFINITY) sawInfinity = true
    lines.push(`${name}_bucket${formatLabels([...labels, ["le", formatNumber(bound)]])} ${cumulative}`)
  }
  if (!sawInfinity) lines.push(`${name}_bucket${formatLabels([...labels, ["le", "+Inf"]])} ${state.count}`)
  lines.push(`${name}_sum${formatLabels(labels)} ${formatNumber(state.sum)}`)
  lines.push(`${name}_count${formatLabels(labels)} ${state.count}`)
  return lines.join("\n")
}

/** Renders a snapshot (`Metric.snapshot`); families and series sorted so the text is stable. */
export const renderPrometheus = (snapshot: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  for (const { metricKey, metricState } of snapshot) {
    const labels: Labels = metricKey.tags.map((tag) => [tag.key, tag.value] as const).sort((
      [a],
      [b]
    ) => (a < b ? -1 : a > b ? 1 : 0))
    const type = kindOf(metricState)
    if (type === undefined) continue
    const family = families.get(metricKey.name) ?? {
      name: metricKey.name,
      type,
      help: Option.getOrElse(metricKey.description, () => metricKey.name),
      lines: []
    }
    // One name, one type: a second kind under a taken name would make the text invalid.
    if (family.type !== type) continue
    families.set(metricKey.name, family)
    const text = MetricState.isHistogramState(metricState)
      ? histogramLines(metricKey.name, labels, metricState)
      : MetricState.isCounterState(metricState)
      ? `${metricKey.name}${formatLabels(labels)} ${formatNumber(metricState.count)}`
      : MetricState.isGaugeState(metricState)
      ? `${metricKey.name}${formatLabels(labels)} ${formatNumber(metricState.value)}`
      : ""
    family.lines.push({ sortKey: formatLabels(labels), text })
  }
  return [...families.values()]
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .map((family) =>
      [
        `# HELP ${family.name} ${escapeHelp(family.help)}`,
        `# TYPE ${family.name} ${family.type}`,
        ...family.lines.sort((a, b) => (a.sortKey < b.sortKey ? -1 : a.sortKey > b.sortKey ? 1 : 0)).map((line) =>
          line.text
        )
      ].join("\n")
    )
    .join("\n") + "\n"
}

/** The process's metrics (its global registry) as Prometheus text. */
export const prometheusText = Effect.map(Metric.snapshot, renderPrometheus)
