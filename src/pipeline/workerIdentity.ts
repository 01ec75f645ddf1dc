import { Config, Effect, Option } from "effect"
import { hostname } from "node:os"
import { newId } from "../domain/Ids.js"

/** `WORKER_ID`, or `worker-{host}-{pid}-{random}`: the lock owner this process writes. */
export const workerIdFromConfig = Effect.gen(function* () {
  const configured = yield* Config.option(Config.nonEmptyString("WORKER_ID"))
  if (Option.isSome(configured)) return configured.value
  return `worker-${hostname()}-${process.pid}-${(yield* newId).slice(-12)}`
})
