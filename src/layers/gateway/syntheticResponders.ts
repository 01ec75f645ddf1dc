import { Either, Schema } from "effect"

/**
 * How the synthetic provider answers one job type: a plausible, schema-valid output derived
 * from the job's input and a deterministic random source (`pick(n)` → 0..n-1).
 */
export type SyntheticResponder = (input: unknown, pick: (n: number) => number) => unknown

const FlashcardInput = Schema.Struct({ sourceText: Schema.String, count: Schema.Number })
const FeynmanInput = Schema.Struct({ concept: Schema.String, explanation: Schema.String })
const AnalysisInput = Schema.Struct({
  evaluations: Schema.Array(
    Schema.Struct({ concept: Schema.String, score: Schema.Number, gaps: Schema.Array(Schema.String) })
  )
})

const sentencesOf = (text: string) =>
  text
    .split(/(?<=[.!?。！？])\s*|\n+/u)
    .map((s) => s.trim().replace(/\s+/g, " "))
    .filter((s) => s.length > 0)

const wordsOf = (text: string) => text.toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}'-]*/gu) ?? []

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`)

const EchoInput = Schema.Struct({ message: Schema.String })

/** `synthetic_echo`: `{ echo: message }` for its `{ message }` input; any other input is returned as it is. */
export const echoResponder: SyntheticResponder = (input) =>
  Either.match(Schema.decodeUnknownEither(EchoInput)(input), {
    onLeft: () => input,
    onRight: ({ message }) => ({ echo: message })
  })

/** `flashcard_generation`: one card per sentence of the source (at most `count`), a cue word on the front. */
export const flashcardResponder: SyntheticResponder = (input, pick) => {
  const decoded = Schema.decodeUnknownEither(FlashcardInput)(input)
  if (Either.isLeft(decoded)) return { flashcards: [] }
  const { count, sourceText } = decoded.right
  const sentences = sentencesOf(sourceText)
  const pool = sentences.length > 0 ? sentences : [clip(sourceText.trim() || "(empty text)", 300)]
  const wanted = Math.max(1, Math.min(Math.floor(count), pool.length))
  const offset = pick(pool.length)
  const flashcards = Array.from({ length: wanted }, (_, i) => {
    const sentence = pool[(offset + i) % pool.length] ?? pool[0] ?? ""
    const candidates = wordsOf(sentence).filter((w) => w.length >= 4)
    const cue = candidates.length > 0 ? candidates[pick(candidates.length)] : undefined
    return {
      front: cue === undefined ? `What is point ${i + 1} of the text?` : `What does the text say about "${cue}"?`,
      back: clip(sentence, 300)
    }
  })
  return { flashcards }
}

/** `feynman_evaluation`: scored by coverage of the concept's words, length and an example. */
export const feynmanResponder: SyntheticResponder = (input, pick) => {
  const decoded = Schema.decodeUnknownEither(FeynmanInput)(input)
  if (Either.isLeft(decoded)) {
    return { score: 0, feedback: "The explanation could not be read.", gaps: ["no explanation"] }
  }
  const { concept, explanation } = decoded.right
  const explained = new Set(wordsOf(explanation))
  const conceptWords = Array.from(new Set(wordsOf(concept).filter((w) => w.length >= 3)))
  const gaps: Array<string> = conceptWords.filter((w) => !explained.has(w)).map((w) => `does not mention "${w}"`)
  const wordCount = wordsOf(explanation).length
  if (wordCount < 20) gaps.push("too brief to cover the concept")
  if (!/for example|for instance|e\.g\.|such as|例如|比如/iu.test(explanation)) gaps.push("no concrete example")
  const base = 40 + Math.min(50, Math.round(wordCount / 2)) - 12 * gaps.length + (pick(11) - 5)
  const score = Math.max(0, Math.min(100, base))
  const feedback = [
    score >= 80
      ? `A clear explanation of ${clip(concept, 80)}.`
      : score >= 50
      ? `A fair start on ${clip(concept, 80)}, with some gaps.`
      : `The explanation of ${clip(concept, 80)} needs more work.`,
    gaps.length === 0 ? "Nothing important is missing." : `Work on: ${gaps.slice(0, 3).join("; ")}.`,
    "Try explaining it again in simple words, as if to a beginner."
  ].join(" ")
  return { score, feedback, gaps }
}

/**
 * `learning_analysis`: concepts scored 70 or more without gaps are strengths, the five most
 * frequent gaps are its gaps, and the plan revisits the weakest concepts (under 70) first.
 */
export const learningAnalysisResponder: SyntheticResponder = (input, pick) => {
  const decoded = Schema.decodeUnknownEither(AnalysisInput)(input)
  if (Either.isLeft(decoded) || decoded.right.evaluations.length === 0) {
    return {
      summary: "The evaluations could not be read.",
      strengths: [],
      gaps: [],
      nextSteps: ["Evaluate a concept first."]
    }
  }
  const evaluations = decoded.right.evaluations
  const concept = (text: string) => clip(text, 80)
  const strengths = evaluations
    .filter((e) => e.score >= 70 && e.gaps.length === 0)
    .map((e) => `explains ${concept(e.concept)} well`)
  const gapCounts = new Map<string, number>()
  for (const gap of evaluations.flatMap((e) => e.gaps).filter((g) => g.trim().length > 0)) {
    gapCounts.set(gap, (gapCounts.get(gap) ?? 0) + 1)
  }
  const gaps = Array.from(gapCounts.entries())
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, 5)
    .map(([gap]) => clip(gap, 300))
  const weakest = [...evaluations].sort((a, b) => a.score - b.score).filter((e) => e.score < 70).slice(0, 3)
  const openers = ["Re-read", "Review", "Revisit"] as const
  const nextSteps = weakest.length === 0
    ? ["Explain a harder concept next, with a concrete example."]
    : weakest.map((e) => `${openers[pick(openers.length)]} ${concept(e.concept)} and explain it again in simple words`)
  const average = Math.round(evaluations.reduce((sum, e) => sum + e.score, 0) / evaluations.length)
  const summary = [
    `Across ${evaluations.length} evaluation${evaluations.length === 1 ? "" : "s"} the average score is ${average}.`,
    strengths.length === 0 ? "No concept is solid yet." : `Strong points: ${strengths.length}.`,
    gaps.length === 0 ? "No recurring gap." : `The gap to work on first: ${gaps[0]}.`
  ].join(" ")
  return { summary, strengths: strengths.slice(0, 20), gaps, nextSteps }
}

export const defaultSyntheticResponders: Readonly<Record<string, SyntheticResponder>> = {
  synthetic_echo: echoResponder,
  flashcard_generation: flashcardResponder,
  feynman_evaluation: feynmanResponder,
  learning_analysis: learningAnalysisResponder
}
