import { Schema } from "effect"

/**
 * String lengths as JSON Schema and MySQL's `VARCHAR(n)` count them: code points, not the UTF-16
 * units of `String.length` (an emoji counts twice there), so what OpenAPI accepts the engine does.
 */

/** How many characters (code points) `text` holds; a lone surrogate counts as one. */
export const characterCount = (text: string): number => {
  let count = 0
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    // A high surrogate followed by a low one is one character.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) i++
    }
    count++
  }
  return count
}

export const maxChars = <S extends Schema.Schema.Any>(max: number) =>
<A extends string>(
  self: S & Schema.Schema<A, Schema.Schema.Encoded<S>, Schema.Schema.Context<S>>
): Schema.filter<S> =>
  self.pipe(
    Schema.filter((value) => characterCount(value) <= max, {
      title: `maxLength(${max})`,
      description: `a string at most ${max} character(s) long`,
      jsonSchema: { maxLength: max }
    })
  )

export const minChars = <S extends Schema.Schema.Any>(min: number) =>
<A extends string>(
  self: S & Schema.Schema<A, Schema.Schema.Encoded<S>, Schema.Schema.Context<S>>
): Schema.filter<S> =>
  self.pipe(
    Schema.filter((value) => characterCount(value) >= min, {
      title: `minLength(${min})`,
      description: `a string at least ${min} character(s) long`,
      jsonSchema: { minLength: min }
    })
  )
