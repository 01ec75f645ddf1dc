/**
 * `npx tsx bench/cpuProfileSummary.ts <profile.cpuprofile>... [--top N] [--jobs N] [--match TEXT]`:
 * a V8 CPU profile (`node --cpu-prof`, e.g. from `BENCH_PROCESSES_CPU_PROF=dir npm run
 * bench:processes`) read in the terminal: self time by package, by file and by function, as
 * shares of the busy time (idle left out). Several profiles are added together (both workers, say).
 *
 * The programs are bundles without source maps (`dist/*.js`): a position in one is put back in its
 * source module by the `// path` comment esbuild writes before each module's code, so the bundle
 * must still be the one that was profiled (or be named with `--bundle`, e.g. a copy kept aside). `--jobs N` adds each row's milliseconds per job (the
 * whole profile, start-up and warm-up included, divided by N); `--match TEXT` lists only the
 * functions whose module or name contains TEXT (`src/pipeline`, say); `--callers TEXT` shows
 * who calls the functions matching TEXT (`--depth` frames up), to find out what a hot builtin serves;
 * `--owners TEXT` adds their time up by the nearest engine frame (`src/`) above them on the stack.
 */
import { existsSync, readFileSync } from "node:fs"
import { basename } from "node:path"
import { fileURLToPath } from "node:url"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** Where a frame's code came from: its package (or engine directory), its file, and a name for the function. */
interface Origin {
  readonly pkg: string
  readonly file: string
  readonly fn: string
}

const usage = "usage: tsx bench/cpuProfileSummary.ts <profile.cpuprofile>... [--top N] [--jobs N] [--match TEXT]" +
  " [--callers TEXT [--depth N]] [--owners TEXT] [--bundle FILE]..."

const parseArguments = (argv: ReadonlyArray<string>) => {
  const files: Array<string> = []
  let top = 25
  let jobs: number | undefined
  let match: string | undefined
  let callers: string | undefined
  let depth = 6
  let owners: string | undefined
  const bundles: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i]!
    const value = () => {
      const next = argv[++i]
      if (next === undefined) throw new Error(`${argument} needs a value\n${usage}`)
      return next
    }
    if (argument === "--top") top = Number(value())
    else if (argument === "--jobs") jobs = Number(value())
    else if (argument === "--match") match = value()
    else if (argument === "--callers") callers = value()
    else if (argument === "--depth") depth = Number(value())
    else if (argument === "--owners") owners = value()
    else if (argument === "--bundle") bundles.push(value())
    else if (argument.startsWith("--")) throw new Error(`unknown option ${argument}\n${usage}`)
    else files.push(argument)
  }
  if (files.length === 0) throw new Error(usage)
  return { files, top, jobs, match, callers, depth, owners, bundles }
}

/** The module each line of a bundle belongs to: esbuild's `// node_modules/...` or `// src/...` comments. */
const bundleModules = new Map<string, { readonly lines: Array<number>; readonly modules: Array<string> } | undefined>()

/** `--bundle` files: read in place of a profiled bundle of the same name (dist/ rebuilt since). */
const bundleOverrides: Array<string> = []

const modulesOf = (url: string) => {
  if (bundleModules.has(url)) return bundleModules.get(url)
  let map: { lines: Array<number>; modules: Array<string> } | undefined
  const profiled = url.startsWith("file://") ? fileURLToPath(url) : url
  const path = bundleOverrides.find((file) => basename(file) === basename(profiled)) ?? profiled
  if (path.endsWith(".js") && existsSync(path)) {
    const lines: Array<number> = []
    const modules: Array<string> = []
    readFileSync(path, "utf8").split("\n").forEach((line, index) => {
      const found = /^\/\/ (\S+\.(?:[cm]?[jt]sx?|json|sql))$/.exec(line)
      if (found) {
        lines.push(index)
        modules.push(found[1]!.replace(/^(\.\.\/)+/, ""))
      }
    })
    if (lines.length > 0) map = { lines, modules }
  }
  bundleModules.set(url, map)
  return map
}

/** `node_modules/@effect/sql/dist/esm/x.js` → `@effect/sql`, `src/pipeline/engine.ts` → `src/pipeline`. */
const packageOf = (module: string): string => {
  const parts = module.split("/")
  const last = parts.lastIndexOf("node_modules")
  if (last >= 0) {
    const name = parts[last + 1] ?? module
    return name.startsWith("@") ? `${name}/${parts[last + 2] ?? ""}` : name
  }
  return parts.length > 1 ? parts.slice(0, -1).join("/") : module
}

/** A package's file without its `dist/esm` (or `dist/cjs`, `lib`) layer: `effect/internal/fiberRuntime.js`. */
const shortFile = (module: string, pkg: string): string => {
  const index = module.lastIndexOf(`node_modules/${pkg}/`)
  if (index < 0) return module
  const rest = module.slice(index + `node_modules/${pkg}/`.length).replace(
    /^(dist\/(esm|cjs|src)\/|dist\/|lib\/|built\/)/,
    ""
  )
  return `${pkg}/${rest}`
}

const originOf = (frame: CallFrame): Origin => {
  const name = frame.functionName === "" ? "(anonymous)" : frame.functionName
  if (frame.url === "") {
    // V8's own entries: (garbage collector), (program), (idle), (root), and native builtins.
    return name.startsWith("(")
      ? { pkg: name, file: name, fn: name }
      : { pkg: "(native)", file: "(native)", fn: name }
  }
  if (frame.url.startsWith("node:")) return { pkg: "node", file: frame.url, fn: `${name} ${frame.url}` }
  const map = modulesOf(frame.url)
  if (map !== undefined) {
    // The last module comment at or before the frame's line.
    let low = 0
    let high = map.lines.length - 1
    let found = -1
    while (low <= high) {
      const middle = (low + high) >> 1
      if (map.lines[middle]! <= frame.lineNumber) {
        found = middle
        low = middle + 1
      } else {
        high = middle - 1
      }
    }
    const module = found < 0 ? "(bundle prelude)" : map.modules[found]!
    const pkg = packageOf(module)
    const file = shortFile(module, pkg)
    return { pkg, file, fn: `${name} ${file} (bundle line ${frame.lineNumber + 1})` }
  }
  const path = frame.url.replace(/^file:\/\//, "")
  const module = path.includes("node_modules/")
    ? path.slice(path.indexOf("node_modules/"))
    : path.replace(/^.*?\/(src|bench|test|scripts)\//, "$1/")
  const pkg = packageOf(module)
  const file = shortFile(module, pkg)
  return { pkg, file, fn: `${name} ${file}:${frame.lineNumber + 1}` }
}

/** Microseconds of self time per node: each sample runs until the next one. */
const selfTimes = (profile: CpuProfile): Map<number, number> => {
  const times = new Map<number, number>()
  const { samples, timeDeltas } = profile
  for (let i = 0; i < samples.length; i++) {
    const next = timeDeltas[i + 1]
    const duration = next ?? Math.max(0, profile.endTime - profile.startTime) / Math.max(1, samples.length)
    const id = samples[i]!
    times.set(id, (times.get(id) ?? 0) + Math.max(0, duration))
  }
  return times
}

const add = (into: Map<string, number>, key: string, us: number) => into.set(key, (into.get(key) ?? 0) + us)

const main = () => {
  const options = parseArguments(process.argv.slice(2))
  bundleOverrides.push(...options.bundles)
  const byPackage = new Map<string, number>()
  const byFile = new Map<string, number>()
  const byFunction = new Map<string, number>()
  const byCallers = new Map<string, number>()
  const byOwner = new Map<string, number>()
  let idle = 0
  let busy = 0
  for (const file of options.files) {
    const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile
    const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
    const parents = new Map<number, number>()
    for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id)
    for (const [id, us] of selfTimes(profile)) {
      const node = nodes.get(id)
      if (node === undefined) continue
      const origin = originOf(node.callFrame)
      if (origin.pkg === "(idle)") {
        idle += us
        continue
      }
      busy += us
      add(byPackage, origin.pkg, us)
      add(byFile, origin.file, us)
      add(byFunction, origin.fn, us)
      if (options.callers !== undefined && origin.fn.includes(options.callers)) {
        const chain: Array<string> = [origin.fn]
        for (let at = parents.get(id); at !== undefined && chain.length <= options.depth; at = parents.get(at)) {
          const caller = nodes.get(at)
          if (caller !== undefined) chain.push(originOf(caller.callFrame).fn)
        }
        add(byCallers, chain.join("\n            <- "), us)
      }
      if (options.owners !== undefined && origin.fn.includes(options.owners)) {
        let owner = "(no src/ frame on the stack)"
        for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
          const frame = nodes.get(at)
          const fn = frame === undefined ? undefined : originOf(frame.callFrame)
          if (fn !== undefined && fn.pkg.startsWith("src")) {
            owner = fn.fn
            break
          }
        }
        add(byOwner, owner, us)
      }
    }
  }
  const ms = (us: number) => (us / 1000).toFixed(0).padStart(8)
  const share = (us: number) => `${((100 * us) / Math.max(1, busy)).toFixed(1).padStart(5)} %`
  const perJob = (us: number) =>
    options.jobs === undefined ? "" : `${(us / 1000 / options.jobs).toFixed(3).padStart(9)} ms/job`
  const table = (title: string, entries: Map<string, number>, filter: (key: string) => boolean = () => true) => {
    const rows = [...entries].filter(([key]) => filter(key)).sort((a, b) => b[1] - a[1]).slice(0, options.top)
    console.log(`\n${title}`)
    for (const [key, us] of rows) console.log(`${share(us)} ${ms(us)} ms${perJob(us)}  ${key}`)
  }
  console.log(
    `${options.files.join(", ")}: busy ${(busy / 1000).toFixed(0)} ms${perJob(busy)}, idle ${
      (idle / 1000).toFixed(0)
    } ms (shares below are of the busy time)`
  )
  table("self time by package", byPackage)
  table("self time by file", byFile)
  table("self time by function", byFunction)
  if (options.match !== undefined) {
    const text = options.match
    table(`self time by function, those matching "${text}"`, byFunction, (key) => key.includes(text))
  }
  if (options.owners !== undefined) {
    table(`self time of "${options.owners}" by the nearest engine (src/) frame above it`, byOwner)
  }
  if (options.callers !== undefined) table(`self time of "${options.callers}" by its callers`, byCallers)
}

main()
