import { Effect, Schema } from "effect"
import type { Redis } from "ioredis"
import { createHash } from "node:crypto"

const Reply = Schema.Array(Schema.Union(Schema.Number, Schema.String))
const decodeReply = Schema.decodeUnknownEither(Reply)

/** Why a script did not answer: a timeout (the connection's `commandTimeout`) or Redis' own error. */
export type ScriptFailure = "timeout" | unknown

/**
 * A Lua script run with EVALSHA on `commands`, loaded with EVAL when Redis does not know it yet;
 * its reply is a flat array of numbers and strings (a single value is wrapped).
 */
export const luaScript = (commands: Redis, source: string) => {
  const sha = createHash("sha1").update(source).digest("hex")
  return (
    keys: ReadonlyArray<string>,
    args: ReadonlyArray<string>
  ): Effect.Effect<ReadonlyArray<number | string>, ScriptFailure> =>
    Effect.tryPromise({
      try: async () => {
        try {
          return await commands.evalsha(sha, keys.length, ...keys, ...args)
        } catch (error) {
          if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
            return await commands.eval(source, keys.length, ...keys, ...args)
          }
          throw error
        }
      },
      catch: (cause): ScriptFailure =>
        cause instanceof Error && cause.message === "Command timed out" ? "timeout" : cause
    }).pipe(Effect.flatMap((reply) => decodeReply(Array.isArray(reply) ? reply : [reply])))
}
