/**
 * `node scripts/start.mjs <program> [args...]`, what the npm start scripts run: builds dist/ when
 * it is missing or stale, then runs `dist/<program>.js` in this same process, so npm's signals
 * (SIGTERM, SIGINT) reach the program itself and `npm ci && npm start` stays one command.
 */
import { pathToFileURL } from "node:url"
import { ensureBuilt, programFile, programs } from "./build.mjs"

const [name, ...args] = process.argv.slice(2)
if (name === undefined || !Object.hasOwn(programs, name)) {
  process.stderr.write(`usage: node scripts/start.mjs <${Object.keys(programs).join("|")}> [args...]\n`)
  process.exit(2)
}

try {
  await ensureBuilt()
} catch (error) {
  process.stderr.write(`\n${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
}

// The program reads its own arguments from process.argv, as if started as `node dist/<program>.js`.
const file = programFile(name)
process.argv = [process.argv[0], file, ...args]
await import(pathToFileURL(file).href)
