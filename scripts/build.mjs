/**
 * `npm run build`: bundles each program (its code and its dependencies) into one file under
 * `dist/`, so a process loads one file instead of resolving and transpiling hundreds of modules.
 * `node scripts/build.mjs --if-stale` builds only when `dist/` is missing or older than the
 * sources; the start scripts run it first (see `start.mjs`).
 */
import { mkdir, readdir, rename, stat, utimes, writeFile } from "node:fs/promises"
import { dirname, join, relative } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

export const repositoryRoot = fileURLToPath(new URL("..", import.meta.url))
export const distDirectory = join(repositoryRoot, "dist")

/** Every program: `dist/{name}.js` is built from its entry point. */
export const programs = {
  "all-in-one": "src/main/all-in-one.ts",
  api: "src/main/api.ts",
  worker: "src/main/worker.ts",
  dispatcher: "src/main/dispatcher.ts",
  migrate: "src/main/migrate.ts",
  simulate: "src/main/simulate.ts",
  token: "src/main/token.ts",
  "migrations-check": "src/main/migrations-check.ts"
}

export const programFile = (name) => join(distDirectory, `${name}.js`)

/** Written last by a successful build: its mtime is when dist/ was last complete. */
const stampFile = join(distDirectory, ".build-stamp")

/** What a build reads: a change to any of these makes dist/ stale. */
const sourceDirectories = ["src", "migrations", "migrations-check"]
const sourceFiles = ["package-lock.json", "tsconfig.json", "scripts/build.mjs"]

const newestMtimeUnder = async (directory) => {
  let newest = 0
  let entries
  try {
    entries = await readdir(directory, { withFileTypes: true })
  } catch {
    return 0
  }
  for (const entry of entries) {
    const path = join(directory, entry.name)
    if (entry.isDirectory()) newest = Math.max(newest, await newestMtimeUnder(path))
    else if (entry.isFile()) newest = Math.max(newest, (await stat(path)).mtimeMs)
  }
  return newest
}

/** Why dist/ needs a build, or undefined when it is up to date. */
export const staleness = async () => {
  let built
  try {
    built = (await stat(stampFile)).mtimeMs
  } catch {
    return "dist/ has not been built"
  }
  for (const name of Object.keys(programs)) {
    try {
      await stat(programFile(name))
    } catch {
      return `dist/${name}.js is missing`
    }
  }
  for (const directory of sourceDirectories) {
    if ((await newestMtimeUnder(join(repositoryRoot, directory))) > built) {
      return `${directory}/ changed since the last build`
    }
  }
  for (const file of sourceFiles) {
    const changed = await stat(join(repositoryRoot, file)).then((s) => s.mtimeMs > built, () => false)
    if (changed) return `${file} changed since the last build`
  }
  return undefined
}

/**
 * What `charset: "ascii"` leaves (comments, some regular expression literals) as `\uXXXX`
 * escapes, which mean the same code unit in a string, a regular expression or an identifier.
 */
// eslint-disable-next-line no-control-regex -- the range starts at NUL on purpose: every non-ASCII character
const asciiOnly = (text) => text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** Bundles every program. Each file is written under a temporary name and renamed, so a program
 * started while another process builds never reads half a file. */
export const build = async () => {
  // A source saved while the build runs must leave dist/ stale: the stamp gets the start time.
  const startedAt = new Date()
  // Loaded here: esbuild is a development dependency, not needed when dist/ is up to date.
  const esbuild = await import("esbuild").catch(() => {
    throw new Error(
      "dist/ needs a build but esbuild is not installed: run `npm ci` (with dev dependencies), then `npm run build`"
    )
  })
  const result = await esbuild.build({
    absWorkingDir: repositoryRoot,
    entryPoints: Object.entries(programs).map(([name, entry]) => ({ in: entry, out: name })),
    outdir: distDirectory,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // CommonJS dependencies (mysql2, ioredis) call require() on Node's modules.
    banner: {
      js:
        "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);"
    },
    // V8 keeps each program's source as a string: one non-ASCII character anywhere makes the whole
    // 8 MB bundle a two-byte string (16 MB per process). Escaped, it stays one byte a character.
    charset: "ascii",
    logLevel: "warning",
    write: false
  })
  await mkdir(distDirectory, { recursive: true })
  for (const file of result.outputFiles) {
    await mkdir(dirname(file.path), { recursive: true })
    const temporary = `${file.path}.${process.pid}.tmp`
    await writeFile(temporary, asciiOnly(file.text))
    await rename(temporary, file.path)
  }
  await writeFile(stampFile, `${startedAt.toISOString()}\n`)
  await utimes(stampFile, startedAt, startedAt)
  return result.outputFiles.map((file) => relative(repositoryRoot, file.path))
}

/** Builds when dist/ is stale; says why on stderr (stdout belongs to the program). */
export const ensureBuilt = async () => {
  const reason = await staleness()
  if (reason === undefined) return
  const started = performance.now()
  process.stderr.write(`build: ${reason}; building dist/ ... `)
  await build()
  process.stderr.write(`done in ${Math.round(performance.now() - started)} ms\n`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  if (process.argv.includes("--if-stale")) {
    await ensureBuilt()
  } else {
    const started = performance.now()
    const files = await build()
    process.stderr.write(`build: ${files.join(", ")} in ${Math.round(performance.now() - started)} ms\n`)
  }
}
