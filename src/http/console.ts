import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { consoleHtml, consoleScript } from "./consoleAssets.js"

/**
 * The operator console (docs/architecture.md §15.4): one HTML page and one script module, both
 * from the repository, served at `/admin`. The page has no inline script, so its policy allows
 * scripts from this origin only (see `pagePolicy`).
 */
export const consoleLayer = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    // Built once: the security headers cache the page's policy by its body.
    const page = HttpServerResponse.html(consoleHtml)
    const script = HttpServerResponse.text(consoleScript, { contentType: "text/javascript; charset=utf-8" })
    yield* router.get("/admin", Effect.succeed(page))
    yield* router.get("/admin/console.js", Effect.succeed(script))
  })
)
