import { Option, Schema } from "effect"
import { rowProjector } from "../rowProjector.js"
import { FlashcardGenerationInput } from "./definition.js"
import { FlashcardGenerationOutput } from "./output.js"

const deckOf = (input: unknown) =>
  Option.getOrNull(
    Option.flatMap(Schema.decodeUnknownOption(FlashcardGenerationInput)(input), (decoded) =>
      Option.fromNullable(decoded.deckId))
  )

/** One `flashcard` row per card, unique on (job_id, ordinal). */
export const flashcardGenerationProjector = rowProjector({
  key: "flashcard_generation",
  output: FlashcardGenerationOutput,
  table: "flashcard",
  uniqueBy: ["job_id", "ordinal"],
  orderBy: "ordinal",
  artifactType: "flashcard",
  rows: (job, output) => {
    // The input is decoded once per job, not once per card.
    const deckId = deckOf(job.input)
    return output.flashcards.map((card, ordinal) => ({
      user_id: job.userId,
      deck_id: deckId,
      ordinal,
      front: card.front,
      back: card.back
    }))
  },
  record: Schema.Struct({
    id: Schema.String,
    deck_id: Schema.NullOr(Schema.String),
    ordinal: Schema.Number,
    front: Schema.String,
    back: Schema.String
  }).pipe(
    Schema.rename({ deck_id: "deckId" })
  )
})
