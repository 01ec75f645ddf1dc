import { describe, expect, it } from "@effect/vitest"
import { Either, JSONSchema, Schema } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { characterCount, maxChars, minChars } from "../../../src/domain/TextLength.js"

const emoji = "\u{1F600}"

describe("string lengths in characters (code points)", () => {
  it("counts a surrogate pair once, a lone surrogate and each combining mark once", () => {
    expect(characterCount("")).toBe(0)
    expect(characterCount("abc")).toBe(3)
    expect(characterCount(emoji.repeat(3))).toBe(3)
    expect(characterCount("e\u0301")).toBe(2)
    expect(characterCount("\ud800x")).toBe(2)
    expect(characterCount("x\udc00")).toBe(2)
  })

  it("maxChars and minChars decide by characters and declare JSON Schema's keywords", () => {
    const Concept = Schema.String.pipe(minChars(1), maxChars(3))
    const decode = Schema.decodeUnknownEither(Concept)
    expect(Either.isRight(decode(emoji.repeat(3)))).toBe(true)
    expect(Either.isLeft(decode(emoji.repeat(4)))).toBe(true)
    expect(Either.isLeft(decode(""))).toBe(true)
    expect(JSONSchema.make(Concept)).toMatchObject({ type: "string", minLength: 1, maxLength: 3 })
  })

  it("no schema in src counts UTF-16 code units (Effect's minLength, maxLength, length)", () => {
    const root = new URL("../../../src", import.meta.url).pathname
    const files = readdirSync(root, { recursive: true, encoding: "utf8" }).filter((file) => file.endsWith(".ts"))
    const offenders = files.filter((file) =>
      /Schema\.(minLength|maxLength|length)\(/.test(readFileSync(join(root, file), "utf8"))
    )
    expect(offenders).toEqual([])
  })
})
