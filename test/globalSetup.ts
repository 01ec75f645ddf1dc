import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

/**
 * Once per run, before any test file: the process tests start the bundles production runs
 * (`dist/*.js`), so build them if the sources changed since the last build.
 */
export const setup = () => {
  execFileSync(process.execPath, ["scripts/build.mjs", "--if-stale"], {
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    stdio: ["ignore", "inherit", "inherit"]
  })
}
