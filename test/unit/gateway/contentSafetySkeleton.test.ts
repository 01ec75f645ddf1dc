import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { ContentSafety } from "../../../src/services/ContentSafety.js"

const rules = {
  blockedTerms: ["bomb", "\u0455ecret Plan", "бомба", "dead drop"],
  blockedPatterns: ["\\bkill\\s+switch\\b", "\\bm[a4]lware\\b", "\\x64irty\\s\\u0064eal"]
}

const outcomeOf = (content: unknown) =>
  Effect.flatMap(ContentSafety, (safety) => Effect.either(safety.check({ stage: "input", jobType: "t", content })))

const expectBlocked = (content: unknown, rule: string) =>
  Effect.map(outcomeOf(content), (outcome) => {
    expect(Either.isLeft(outcome), `${JSON.stringify(content)} should be blocked`).toBe(true)
    if (Either.isLeft(outcome)) {
      expect(outcome.left).toMatchObject({ _tag: "ContentSafetyError", code: "CONTENT_SAFETY_BLOCKED" })
      expect(outcome.left.message).toContain(rule)
    }
  })

const expectAllowed = (content: unknown) =>
  Effect.map(
    outcomeOf(content),
    (outcome) => expect(Either.isRight(outcome), `${JSON.stringify(content)} should pass`).toBe(true)
  )

describe("content safety matches on the normalised skeleton", () => {
  const layer = ContentSafety.withRules(rules)

  it.effect("the plain term, as before", () =>
    expectBlocked("how to build a bomb", "term #1").pipe(Effect.provide(layer)))

  it.effect("a zero-width space inside the term (U+200B)", () =>
    expectBlocked("b\u200Bomb", "term #1").pipe(Effect.provide(layer)))

  it.effect("a zero-width joiner and a byte-order mark inside the term (U+200D, U+FEFF)", () =>
    Effect.all([expectBlocked("bo\u200Dmb", "term #1"), expectBlocked("bom\uFEFFb", "term #1")]).pipe(
      Effect.provide(layer)
    ))

  it.effect("a soft hyphen inside the term (U+00AD)", () =>
    expectBlocked("b\u00ADomb", "term #1").pipe(Effect.provide(layer)))

  it.effect("variation selectors and the combining grapheme joiner (U+FE0F, U+E0100, U+034F)", () =>
    Effect.all([
      expectBlocked("b\uFE0Fomb", "term #1"),
      expectBlocked("bo\u{E0100}mb", "term #1"),
      expectBlocked("b\u034Fomb", "term #1")
    ]).pipe(Effect.provide(layer)))

  it.effect("Cyrillic look-alikes (о U+043E, В U+0412 upper case)", () =>
    Effect.all([expectBlocked("b\u043Emb", "term #1"), expectBlocked("\u0412OMB", "term #1")]).pipe(
      Effect.provide(layer)
    ))

  it.effect("combining marks on the letters, decomposed or precomposed (U+0301, ó, ö, U+20DD)", () =>
    Effect.all([
      expectBlocked("bo\u0301mb", "term #1"),
      expectBlocked("b\u00F3mb", "term #1"),
      expectBlocked("B\u00D6MB", "term #1"),
      expectBlocked("b\u0301o\u0308\u0323m\u20DDb", "term #1"),
      expectBlocked("б\u0301омба", "term #3"),
      expectBlocked("the kill\u0300 switch", "pattern #1")
    ]).pipe(Effect.provide(layer)))

  it.effect("full-width and upper case letters", () => expectBlocked("ＢＯＭＢ", "term #1").pipe(Effect.provide(layer)))

  it.effect("every trick at once, deep inside the content", () =>
    expectBlocked({ cards: [{ front: "ok", back: "a \uFF42\u200B\u043E\u00ADmb here" }] }, "term #1").pipe(
      Effect.provide(layer)
    ))

  it.effect("a term written with a look-alike in the rule catches the plain text", () =>
    expectBlocked("our secret plan", "term #2").pipe(Effect.provide(layer)))

  it.effect("a look-alike that exists in lower case only (Cyrillic ԁ U+0501), in any case of the rest", () =>
    Effect.all([expectBlocked("the \u0501ead drop", "term #4"), expectBlocked("THE \u0501EAD DROP", "term #4")]).pipe(
      Effect.provide(layer)
    ))

  it.effect("a rule in another script still matches case-insensitively", () =>
    Effect.all([expectBlocked("БОМБА", "term #3"), expectBlocked("Бом\u200Bба", "term #3")]).pipe(
      Effect.provide(layer)
    ))

  it.effect("patterns apply to the skeleton too: zero-width, soft hyphen and Cyrillic inside", () =>
    Effect.all([
      expectBlocked("the kill\u200B switch", "pattern #1"),
      expectBlocked("the k\u0456ll switch", "pattern #1"),
      expectBlocked("some m\u00AD4lware", "pattern #2"),
      expectBlocked("some m\u0430lware", "pattern #2"),
      expectBlocked("a dirty d\u0435al", "pattern #3")
    ]).pipe(Effect.provide(layer)))

  it.effect("harmless text still passes", () =>
    Effect.all([
      expectAllowed("a harmless sentence about combs and tombs"),
      expectAllowed({ text: "Тhe kill count", other: ["switch"] }),
      expectAllowed("b o m b is spaced out")
    ]).pipe(Effect.provide(layer)))
})
