/**
 * A strict parser of the Prometheus text exposition format (0.0.4), for tests: it refuses what
 * Prometheus' own parser refuses (bad names, bad escapes, a family split in two, a TYPE after its
 * samples, a duplicate series, a malformed value) and checks histograms (cumulative buckets, a
 * `+Inf` bucket equal to `_count`). The one maintained npm parser found accepts most of that
 * silently, so the checks live here.
 */

export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped"

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface MetricFamily {
  readonly name: string
  readonly type: MetricType
  readonly help: string | undefined
  readonly samples: ReadonlyArray<Sample>
}

export class PrometheusParseError extends Error {
  constructor(readonly line: number, reason: string) {
    super(`line ${line}: ${reason}`)
  }
}

const metricName = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const labelName = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const types: ReadonlyArray<MetricType> = ["counter", "gauge", "histogram", "summary", "untyped"]

const parseValue = (text: string, line: number): number => {
  if (text === "+Inf" || text === "Inf") return Number.POSITIVE_INFINITY
  if (text === "-Inf") return Number.NEGATIVE_INFINITY
  if (text === "NaN") return Number.NaN
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
    throw new PrometheusParseError(line, `not a number: ${JSON.stringify(text)}`)
  }
  return Number(text)
}

/** `name{a="1",b="x\"y"}` → name and labels; the rest of the line is returned for the value. */
const parseSeries = (text: string, line: number) => {
  const brace = text.indexOf("{")
  const space = text.search(/[ \t]/)
  const nameEnd = brace !== -1 && (space === -1 || brace < space) ? brace : space
  if (nameEnd <= 0) throw new PrometheusParseError(line, "a sample needs a name and a value")
  const name = text.slice(0, nameEnd)
  if (!metricName.test(name)) throw new PrometheusParseError(line, `invalid metric name ${JSON.stringify(name)}`)
  const labels: Record<string, string> = {}
  let i = nameEnd
  if (text[i] === "{") {
    i++
    for (;;) {
      while (text[i] === " ") i++
      if (text[i] === "}") {
        i++
        break
      }
      const eq = text.indexOf("=", i)
      if (eq === -1) throw new PrometheusParseError(line, "a label needs =")
      const key = text.slice(i, eq).trim()
      if (!labelName.test(key)) throw new PrometheusParseError(line, `invalid label name ${JSON.stringify(key)}`)
      if (key in labels) throw new PrometheusParseError(line, `label ${key} given twice`)
      i = eq + 1
      if (text[i] !== "\"") throw new PrometheusParseError(line, `label ${key}: the value must be quoted`)
      i++
      let value = ""
      for (;;) {
        const c = text[i]
        if (c === undefined) throw new PrometheusParseError(line, `label ${key}: unterminated value`)
        if (c === "\"") break
        if (c === "\n") throw new PrometheusParseError(line, "a raw newline in a label value")
        if (c === "\\") {
          const next = text[i + 1]
          if (next === "\\") value += "\\"
          else if (next === "\"") value += "\""
          else if (next === "n") value += "\n"
          else throw new PrometheusParseError(line, `label ${key}: invalid escape \\${next ?? ""}`)
          i += 2
          continue
        }
        value += c
        i++
      }
      labels[key] = value
      i++
      while (text[i] === " ") i++
      if (text[i] === ",") i++
      else if (text[i] !== "}") throw new PrometheusParseError(line, "labels must be separated by commas")
    }
  }
  const rest = text.slice(i)
  if (!/^[ \t]/.test(rest)) throw new PrometheusParseError(line, "a space must separate the series from its value")
  const parts = rest.trim().split(/[ \t]+/)
  if (parts.length < 1 || parts.length > 2 || parts[0] === "") {
    throw new PrometheusParseError(line, "expected a value and an optional timestamp")
  }
  if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) {
    throw new PrometheusParseError(line, "the timestamp must be an integer")
  }
  return { name, labels, value: parseValue(parts[0] ?? "", line) }
}

const familyOf = (sampleName: string, family: { readonly name: string; readonly type: MetricType } | undefined) => {
  if (family === undefined) return undefined
  const { name, type } = family
  if (type === "histogram") {
    return [`${name}_bucket`, `${name}_sum`, `${name}_count`].includes(sampleName)
      ? name
      : undefined
  }
  if (type === "summary") return [name, `${name}_sum`, `${name}_count`].includes(sampleName) ? name : undefined
  return sampleName === name ? name : undefined
}

const seriesKey = (sample: Sample) =>
  `${sample.name}{${
    Object.entries(sample.labels).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(",")
  }}`

const checkHistogram = (family: MetricFamily) => {
  const groups = new Map<string, { buckets: Array<readonly [number, number]>; count: number | undefined }>()
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels
    const key = seriesKey({ name: "", labels: rest, value: 0 })
    const group = groups.get(key) ?? { buckets: [], count: undefined }
    groups.set(key, group)
    if (sample.name.endsWith("_bucket")) {
      if (le === undefined) throw new PrometheusParseError(0, `${family.name}: a bucket without le`)
      group.buckets.push([parseValue(le, 0), sample.value])
    } else if (sample.name.endsWith("_count")) {
      group.count = sample.value
    }
  }
  for (const [key, group] of groups) {
    const sorted = [...group.buckets].sort(([a], [b]) => a - b)
    for (let i = 1; i < sorted.length; i++) {
      if ((sorted[i]?.[1] ?? 0) < (sorted[i - 1]?.[1] ?? 0)) {
        throw new PrometheusParseError(0, `${family.name}${key}: buckets are not cumulative`)
      }
    }
    const last = sorted[sorted.length - 1]
    if (last === undefined || last[0] !== Number.POSITIVE_INFINITY) {
      throw new PrometheusParseError(0, `${family.name}${key}: no +Inf bucket`)
    }
    if (group.count !== last[1]) {
      throw new PrometheusParseError(
        0,
        `${family.name}${key}: _count ${group.count} differs from the +Inf bucket ${last[1]}`
      )
    }
  }
}

/** Parses the whole text or throws `PrometheusParseError` naming the first bad line. */
export const parsePrometheusText = (text: string): ReadonlyArray<MetricFamily> => {
  const families: Array<
    { name: string; type: MetricType; help: string | undefined; samples: Array<Sample>; sawSample: boolean }
  > = []
  const byName = new Map<string, (typeof families)[number]>()
  const seen = new Set<string>()
  let current: (typeof families)[number] | undefined
  const open = (name: string, lineNo: number) => {
    const existing = byName.get(name)
    if (existing !== undefined) {
      if (existing !== current) throw new PrometheusParseError(lineNo, `family ${name} appears in two places`)
      return existing
    }
    const family = { name, type: "untyped" as MetricType, help: undefined, samples: [], sawSample: false }
    families.push(family)
    byName.set(name, family)
    current = family
    return family
  }
  if (text.length > 0 && !text.endsWith("\n")) throw new PrometheusParseError(0, "the text must end with a newline")
  text.split("\n").forEach((raw, index) => {
    const lineNo = index + 1
    const line = raw.replace(/\r$/, "")
    if (line.trim() === "") return
    if (line.startsWith("#")) {
      const match = /^#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(line)
      if (match === null) return // an ordinary comment
      const [, kind, name = "", rest = ""] = match
      if (!metricName.test(name)) throw new PrometheusParseError(lineNo, `invalid metric name ${JSON.stringify(name)}`)
      const family = open(name, lineNo)
      if (kind === "TYPE") {
        const type = types.find((t) => t === rest.trim())
        if (type === undefined) throw new PrometheusParseError(lineNo, `unknown type ${JSON.stringify(rest)}`)
        if (family.sawSample || seen.has(`TYPE ${name}`)) {
          throw new PrometheusParseError(lineNo, `TYPE of ${name} after its samples or twice`)
        }
        seen.add(`TYPE ${name}`)
        family.type = type
      } else {
        if (seen.has(`HELP ${name}`)) throw new PrometheusParseError(lineNo, `HELP of ${name} given twice`)
        seen.add(`HELP ${name}`)
        if (/\\(?![\\n])/.test(rest)) throw new PrometheusParseError(lineNo, "invalid escape in HELP")
        family.help = rest.replace(/\\n/g, "\n").replace(/\\\\/g, "\\")
      }
      return
    }
    const sample = parseSeries(line, lineNo)
    const familyName = familyOf(sample.name, current) ?? sample.name
    const family = familyName === current?.name ? current : open(familyName, lineNo)
    if (family.type === "histogram" && sample.name.endsWith("_bucket") && sample.labels["le"] === undefined) {
      throw new PrometheusParseError(lineNo, `${sample.name}: a bucket needs le`)
    }
    const key = seriesKey(sample)
    if (seen.has(key)) throw new PrometheusParseError(lineNo, `series ${key} given twice`)
    seen.add(key)
    family.sawSample = true
    family.samples.push(sample)
  })
  const result = families.map(({ help, name, samples, type }) => ({ name, type, help, samples }))
  for (const family of result) if (family.type === "histogram") checkHistogram(family)
  return result
}

/** The value of the series with exactly these labels, or undefined. */
export const sampleValue = (
  families: ReadonlyArray<MetricFamily>,
  name: string,
  labels: Readonly<Record<string, string>> = {}
) => {
  const wanted = seriesKey({ name, labels, value: 0 })
  for (const family of families) {
    for (const sample of family.samples) if (seriesKey(sample) === wanted) return sample.value
  }
  return undefined
}

/** The sum over every series of `name` whose labels include `match`. */
export const sumOf = (
  families: ReadonlyArray<MetricFamily>,
  name: string,
  match: Readonly<Record<string, string>> = {}
) =>
  families
    .flatMap((family) => family.samples)
    .filter((sample) => sample.name === name && Object.entries(match).every(([k, v]) => sample.labels[k] === v))
    .reduce((total, sample) => total + sample.value, 0)
