import { describe, expect, it } from "@effect/vitest"
import { canonicalJson, outputHash } from "../../../src/domain/CanonicalJson.js"

describe("outputHash", () => {
  it("differs when only a nested field differs (the spec's allow-list bug)", () => {
    const a = { flashcards: [{ front: "What is 2+2?", back: "4" }] }
    const b = { flashcards: [{ front: "What is 2+2?", back: "5" }] }
    expect(outputHash(a)).not.toBe(outputHash(b))
    // The spec's formula hashes both alike: the key list drops every nested field.
    const adr = (value: Record<string, unknown>) => JSON.stringify(value, Object.keys(value).sort())
    expect(adr(a)).toBe(adr(b))
  })

  it("is equal for the same object with keys in another order, at every depth", () => {
    const a = { score: 80, gaps: ["x", "y"], detail: { z: 1, a: { k: true, b: null } } }
    const b = { detail: { a: { b: null, k: true }, z: 1 }, gaps: ["x", "y"], score: 80 }
    expect(canonicalJson(a)).toBe(canonicalJson(b))
    expect(outputHash(a)).toBe(outputHash(b))
    expect(outputHash(a)).toMatch(/^[0-9a-f]{64}$/)
  })

  it("writes keys in code-unit order at every depth, without whitespace, undefined fields or Date objects", () => {
    const value = { b: 1, a: { d: 1, c: 2, gone: undefined }, C: [{ y: 1, x: 2 }], at: new Date(Date.UTC(2026, 0, 2)) }
    expect(canonicalJson(value)).toBe(
      "{\"C\":[{\"x\":2,\"y\":1}],\"a\":{\"c\":2,\"d\":1},\"at\":\"2026-01-02T00:00:00.000Z\",\"b\":1}"
    )
  })

  it("is the SHA-256 of the canonical JSON's UTF-8 bytes, so hashes stored earlier still match", () => {
    expect(outputHash({ b: [1, { d: true, c: null }], a: "é" })).toBe(
      "38780cd71bd9e8d25bad10645bd2671fb22c030b647c3417cefaab28825ed03a"
    )
  })

  it("keeps array order significant", () => {
    expect(outputHash({ gaps: ["x", "y"] })).not.toBe(outputHash({ gaps: ["y", "x"] }))
  })
})
