/**
 * The keys of a JSON object text that appear more than once at its top level. `JSON.parse` keeps
 * the last of them silently, so a setting written twice would drop the first without a word.
 * Returns [] for anything that is not an object (the Schema decode reports that).
 */
export const duplicateTopLevelKeys = (text: string): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const duplicates = new Set<string>()
  let depth = 0
  let index = 0
  // A key is a string at depth 1 followed (after blanks) by a colon.
  while (index < text.length) {
    const char = text[index]
    if (char === "\"") {
      const start = index
      index++
      while (index < text.length && text[index] !== "\"") index += text[index] === "\\" ? 2 : 1
      const literal = text.slice(start, index + 1)
      index++
      let next = index
      while (next < text.length && /\s/.test(text[next] ?? "")) next++
      if (depth === 1 && text[next] === ":") {
        const key = parseKey(literal)
        if (key !== undefined) (seen.has(key) ? duplicates : seen).add(key)
      }
      continue
    }
    if (char === "{" || char === "[") depth++
    else if (char === "}" || char === "]") depth--
    index++
  }
  return [...duplicates]
}

const parseKey = (literal: string): string | undefined => {
  try {
    const value: unknown = JSON.parse(literal)
    return typeof value === "string" ? value : undefined
  } catch {
    return undefined
  }
}
