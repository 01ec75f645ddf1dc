import { it, makeMethods } from "@effect/vitest"

/**
 * `layer(...)` from @effect/vitest rebinds the shared `it.effect` and `it.scoped` to its own
 * runtime (its TestClock included) for every later caller. Files that share a process would
 * inherit the last file's layer, so each file starts from the default methods again.
 */
makeMethods(it)
