import { Schema } from "effect"
import { maxChars, minChars } from "../../domain/TextLength.js"

const CardText = (max: number) => Schema.String.pipe(minChars(1), maxChars(max))

/** `{ flashcards: [{ front, back }] }`, 1..50 cards (the job's `count` caps it further). */
export const FlashcardGenerationOutput = Schema.Struct({
  flashcards: Schema.Array(Schema.Struct({ front: CardText(2_000), back: CardText(4_000) })).pipe(
    Schema.minItems(1),
    Schema.maxItems(50)
  )
})
export type FlashcardGenerationOutput = typeof FlashcardGenerationOutput.Type
