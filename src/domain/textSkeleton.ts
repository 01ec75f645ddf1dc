import { Schema } from "effect"
import { createRequire } from "node:module"

/**
 * Unicode TR39's confusables table (source code point → prototype), as the `unhomoglyph` package
 * ships it from Unicode's confusables.txt. Decoded once, at load.
 */
const confusables: ReadonlyMap<string, string> = new Map(
  Object.entries(
    Schema.decodeUnknownSync(Schema.Record({ key: Schema.String, value: Schema.String }))(
      createRequire(import.meta.url)("unhomoglyph/data.json")
    )
  )
)

/**
 * Characters that render as nothing or only change how a neighbour looks: format characters
 * (zero-width spaces, soft hyphen, bidi controls) and default ignorables (variation selectors...).
 */
const invisible = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu

/** Full case folding as far as JavaScript has it: upper then lower (ß → ss), final sigma as sigma. */
const caseFold = (text: string) => text.toUpperCase().toLowerCase().replaceAll("\u03C2", "\u03C3")

/** Which UTF-16 code units start a mapped code point (surrogates are looked up as pairs). */
const mappedUnits = new Uint8Array(0x10000)
for (const key of confusables.keys()) mappedUnits[key.charCodeAt(0)] = 1

/** Each code point replaced by its prototype; runs of unmapped text are copied, not rebuilt. */
const mapConfusables = (text: string) => {
  let mapped = ""
  let copiedUpTo = 0
  for (let index = 0; index < text.length; index++) {
    if (mappedUnits[text.charCodeAt(index)] !== 1) continue
    const width = (text.codePointAt(index) ?? 0) > 0xffff ? 2 : 1
    const prototype = confusables.get(text.slice(index, index + width))
    if (prototype !== undefined) {
      mapped += text.slice(copiedUpTo, index) + prototype
      copiedUpTo = index + width
    }
    index += width - 1
  }
  return copiedUpTo === 0 ? text : mapped + text.slice(copiedUpTo)
}

/**
 * Nonspacing and enclosing combining marks (accents, dots, breves, U+20DD's circle...): after NFD
 * each is a code point of its own, and a letter carrying one reads as that letter. Spacing marks
 * (`Mc`, the vowel signs of Indic scripts) are parts of letters and stay.
 */
const combiningMarks = /[\p{Mn}\p{Me}]/gu

/**
 * TR39 `skeleton(X) = NFD(map(NFD(X)))`, with the text's own combining marks dropped after the
 * first NFD, as confusable matching does (`bo\u0301mb` and `bómb` match `bomb`). The marks of the
 * table's prototypes stay: they are how it tells `Б` (`b\u0304`) from `B`.
 */
const tr39Skeleton = (text: string) =>
  mapConfusables(text.normalize("NFD").replace(combiningMarks, "")).normalize("NFD")

const visibleText = (text: string) => text.normalize("NFKC").replace(invisible, "")

/**
 * NFKC, invisible characters removed and case folded: what a reader sees, without the confusable
 * mapping (patterns that use digits or punctuation are matched on this too).
 */
export const foldedText = (text: string) => caseFold(visibleText(text))

/**
 * The TR39 skeletons of a text's upper case and folded forms (after NFKC, invisibles removed), each
 * case folded. TR39 maps by case (`В` → `B` but `в` → `ʙ`; `m` → `rn` but `M` → `M`), so one case
 * alone would miss look-alikes that exist in one case only; a rule matches when found in either
 * form. `ВOMB`, `bоmb`, `ＢＯＭＢ`, `b\u200Bomb` and `bo\u0301mb` all match `bomb`.
 */
export interface TextSkeletons {
  readonly upper: string
  readonly lower: string
}

export const textSkeletons = (text: string): TextSkeletons => {
  const visible = visibleText(text)
  return { upper: caseFold(tr39Skeleton(visible.toUpperCase())), lower: caseFold(tr39Skeleton(caseFold(visible))) }
}

const regexSyntax = /[\\^$.*+?()[\]{}|/]/g

/** A literal for a `u`-flag regular expression (outside a class, `-` must not be escaped there). */
const regexLiteral = (text: string) => text.replace(regexSyntax, "\\$&")

/** The whole escape sequence that starts at `index` (a backslash) in a `u`-flag pattern. */
const escapeAt = (codePoints: ReadonlyArray<string>, index: number): string => {
  const rest = codePoints.slice(index, index + 64).join("")
  const escape =
    /^\\(?:[pP]\{[^}]*\}|u\{[0-9a-fA-F]*\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|c[a-zA-Z]|k<[^>]*>|[1-9][0-9]*|[\s\S]?)/u
      .exec(rest)
  return escape?.[0] ?? "\\"
}

/**
 * A regular expression's source with each literal character replaced by its skeleton of `form`,
 * so that the pattern can be matched on that skeleton of a text. Escapes (`\d`, `\.`, `\u0431`...),
 * character classes, groups, quantifiers and anchors are kept as written: a class or an escape
 * is matched on `foldedText` by the original pattern instead.
 */
export const skeletonPatternSource = (source: string, form: keyof TextSkeletons): string => {
  let out = ""
  let index = 0
  const codePoints = Array.from(source)
  const at = (i: number) => codePoints[i] ?? ""
  while (index < codePoints.length) {
    const char = at(index)
    if (char === "\\") {
      const escape = escapeAt(codePoints, index)
      out += escape
      index += Array.from(escape).length
    } else if (char === "[") {
      let end = index + 1
      while (end < codePoints.length && at(end) !== "]") end += at(end) === "\\" ? 2 : 1
      out += codePoints.slice(index, end + 1).join("")
      index = end + 1
    } else if (char === "{") {
      let end = index
      while (end < codePoints.length && at(end) !== "}") end++
      out += codePoints.slice(index, end + 1).join("")
      index = end + 1
    } else if (char === "(" && at(index + 1) === "?") {
      // `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!` and `(?<name>` open a group without a literal.
      let end = index + 2
      if (at(end) === "<" && at(end + 1) !== "=" && at(end + 1) !== "!") {
        while (end < codePoints.length && at(end) !== ">") end++
      } else if (at(end) === "<") end++
      out += codePoints.slice(index, end + 1).join("")
      index = end + 1
    } else if ("^$.*+?()|".includes(char)) {
      out += char
      index++
    } else {
      const skeleton = textSkeletons(char)[form]
      // A group, so that a quantifier after the character applies to all of its skeleton.
      out += skeleton === char ? regexLiteral(char) : `(?:${regexLiteral(skeleton)})`
      index++
    }
  }
  return out
}
