import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, posix, relative, resolve } from "node:path"

/**
 * The layout's import rule (docs/architecture.md §17): the pipeline and the API use ports from
 * `src/services`; adapters in `src/layers` implement them; only `src/main` (and the simulation,
 * which is a composition root of its own) wires adapters to use cases.
 */
const rooms = ["domain", "config", "services", "jobs", "layers", "pipeline", "http", "main", "simulation"] as const
type Room = (typeof rooms)[number]

const allowedRooms: Readonly<Record<Room, ReadonlyArray<Room> | "any">> = {
  domain: ["domain"],
  config: ["domain", "config"],
  services: ["domain", "config", "services"],
  jobs: ["domain", "services", "jobs"],
  layers: ["domain", "config", "services", "layers"],
  pipeline: ["domain", "config", "services", "pipeline"],
  http: ["domain", "config", "services", "jobs", "http"],
  main: "any",
  simulation: "any"
}

/** Adapter families that may use one another, and why. Any other cross-family import is a violation. */
const allowedAdapterImports: ReadonlyArray<readonly [string, string]> = [
  ["layers/bullmq", "layers/redis"], // BullMQ runs on the shared Redis connection
  ["layers/redis", "layers/memory"] // Redis signals fan out inside the process through the in-process signal
]

/** Packages that only adapters (and the composition root) may load. */
const adapterPackages = ["bullmq", "ioredis", "mysql2", "@effect/sql", "@effect/sql-mysql2"]
const adapterPackageUsers: ReadonlyArray<Room> = ["layers", "main", "simulation"]

/**
 * Packages that one adapter family alone (and the composition root) may load: the OpenTelemetry
 * SDK stays behind `src/layers/telemetry`; everything else uses Effect's own spans and metrics.
 */
const familyPackages: ReadonlyArray<
  { readonly name: string; readonly matches: (specifier: string) => boolean; readonly users: ReadonlyArray<string> }
> = [
  {
    name: "@effect/opentelemetry",
    matches: (specifier) => specifier === "@effect/opentelemetry" || specifier.startsWith("@effect/opentelemetry/"),
    users: ["layers/telemetry", "main"]
  },
  {
    name: "@opentelemetry/*",
    matches: (specifier) => specifier.startsWith("@opentelemetry/"),
    users: ["layers/telemetry", "main"]
  }
]

/** Folders outside `src/` that a room may read: the migrations for the MySQL adapter. */
const allowedOutside: Readonly<Partial<Record<string, ReadonlyArray<string>>>> = {
  "layers/mysql": ["migrations"],
  main: ["migrations", "migrations-check"]
}

export interface SourceFile {
  /** Path relative to the repository root, with forward slashes: `src/pipeline/engine.ts`. */
  readonly path: string
  readonly text: string
}

export interface ImportViolation {
  readonly from: string
  readonly specifier: string
  readonly rule: string
}

const importSpecifiers =
  /(?:^|\n)\s*(?:import|export)\s[^"']*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g

const roomOf = (path: string): { readonly room: Room; readonly family: string } | undefined => {
  const parts = path.split("/")
  if (parts[0] !== "src") return undefined
  const room = rooms.find((r) => r === parts[1])
  if (room === undefined) return undefined
  const family = room === "layers" && parts.length > 3 ? `layers/${parts[2]}` : room
  return { room, family }
}

export const importViolations = (files: ReadonlyArray<SourceFile>): ReadonlyArray<ImportViolation> => {
  const violations: Array<ImportViolation> = []
  for (const file of files) {
    const source = roomOf(file.path)
    if (source === undefined) continue
    for (const match of file.text.matchAll(importSpecifiers)) {
      const specifier = match[1] ?? match[2] ?? ""
      if (!specifier.startsWith(".")) {
        const familyPackage = familyPackages.find((p) => p.matches(specifier))
        if (familyPackage !== undefined) {
          if (!familyPackage.users.includes(source.family)) {
            violations.push({
              from: file.path,
              specifier,
              rule: `src/${source.family} must not load ${familyPackage.name} (only ${
                familyPackage.users.map((u) => `src/${u}`).join(" and ")
              })`
            })
          }
          continue
        }
        const pkg = adapterPackages.find((p) => specifier === p || specifier.startsWith(`${p}/`))
        if (pkg !== undefined && !adapterPackageUsers.includes(source.room)) {
          violations.push({
            from: file.path,
            specifier,
            rule: `src/${source.room} must not load ${pkg} (an adapter's package)`
          })
        }
        continue
      }
      const targetPath = posix.normalize(posix.join(posix.dirname(file.path), specifier))
      const target = roomOf(targetPath)
      if (target === undefined) {
        const outside = targetPath.split("/")[0] ?? targetPath
        if (!(allowedOutside[source.family] ?? allowedOutside[source.room] ?? []).includes(outside)) {
          violations.push({ from: file.path, specifier, rule: `src/${source.room} must not import ${outside}/` })
        }
        continue
      }
      const allowed = allowedRooms[source.room]
      if (allowed !== "any" && !allowed.includes(target.room)) {
        violations.push({ from: file.path, specifier, rule: `src/${source.room} must not import src/${target.room}` })
        continue
      }
      const crossFamily = source.room === "layers" && target.room === "layers" && source.family !== target.family &&
        target.family !== "layers"
      if (crossFamily && !allowedAdapterImports.some(([from, to]) => from === source.family && to === target.family)) {
        violations.push({
          from: file.path,
          specifier,
          rule: `src/${source.family} must not import src/${target.family}`
        })
      }
    }
  }
  return violations
}

const listTypeScript = (directory: string): Array<string> =>
  readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name)
    return entry.isDirectory() ? listTypeScript(path) : entry.name.endsWith(".ts") ? [path] : []
  })

export const repositoryRoot = resolve(dirname(new URL(import.meta.url).pathname), "../..")

/** Every `.ts` file under `src/`, as the rule sees it. */
export const sourceFiles = (): ReadonlyArray<SourceFile> =>
  listTypeScript(join(repositoryRoot, "src")).map((absolute) => ({
    path: relative(repositoryRoot, absolute).split("\\").join("/"),
    text: readFileSync(absolute, "utf8")
  }))
