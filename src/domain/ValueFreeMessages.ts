import { Effect, Option, ParseResult, Predicate, type Schema, SchemaAST } from "effect"

/**
 * Decode errors for clients that name the field and the rule, never the value sent: Effect
 * Schema's own formatters print the actual input ("Expected ..., actual <value>"), and
 * transformations put it in their messages (NumberFromString, parseJson). These messages are
 * built from the issue's path, its kind and the schema's annotations only.
 */

interface FieldProblem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly text: string
}

/** `items[3].sourceText`: an index after a field is bracketed; a path that starts at an index stays `3.sourceText`. */
const describePath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (text, key) =>
      text.length === 0 ? String(key) : typeof key === "number" ? `${text}[${key}]` : `${text}.${String(key)}`,
    ""
  )

interface AnnotatedMessage {
  readonly text: string
  /** Whether it wins over the message of a nested problem (as in Effect's own formatters). */
  readonly override: boolean
}

/** A `message` annotation written with the schema (ours describe the rule, never the value). */
const annotatedMessage = (
  issue: ParseResult.Type | ParseResult.Refinement | ParseResult.Transformation | ParseResult.Composite
): Effect.Effect<Option.Option<AnnotatedMessage>> => {
  const annotation = SchemaAST.getMessageAnnotation(issue.ast)
  if (Option.isNone(annotation)) return Effect.succeedNone
  const result = annotation.value(issue)
  const { message, override } = Predicate.isString(result) || Effect.isEffect(result)
    ? { message: result, override: false }
    : result
  return Effect.map(
    Predicate.isString(message) ? Effect.succeed(message) : message,
    (text) => Option.some({ text, override })
  )
}

const isNumber = (value: unknown): value is number => typeof value === "number"

/** The rule of a built-in filter, read from the JSON Schema it declares (`maxLength: 512`, `maxItems: 20`). */
const filterRule = (ast: SchemaAST.AST): Option.Option<string> =>
  Option.flatMap(SchemaAST.getJSONSchemaAnnotation(ast), (jsonSchema): Option.Option<string> => {
    const rule: Record<string, unknown> = { ...jsonSchema }
    const { maxItems, maxLength, maximum, minItems, minLength, minimum } = rule
    if (isNumber(minItems) && isNumber(maxItems)) return Option.some(`must have from ${minItems} to ${maxItems} items`)
    if (isNumber(maxItems)) return Option.some(`must have at most ${maxItems} items`)
    if (isNumber(minItems)) {
      return Option.some(minItems === 1 ? "must not be empty" : `must have at least ${minItems} items`)
    }
    if (isNumber(minLength) && isNumber(maxLength)) return Option.some(`from ${minLength} to ${maxLength} characters`)
    if (minLength === 1) return Option.some("must not be empty")
    if (isNumber(minLength)) return Option.some(`at least ${minLength} characters`)
    if (isNumber(maxLength)) return Option.some(`at most ${maxLength} characters`)
    if (isNumber(minimum) && isNumber(maximum)) return Option.some(`must be from ${minimum} to ${maximum}`)
    if (isNumber(minimum)) return Option.some(`must be at least ${minimum}`)
    if (isNumber(maximum)) return Option.some(`must be at most ${maximum}`)
    if (rule["type"] === "integer") return Option.some("must be a whole number")
    if (typeof rule["pattern"] === "string") return Option.some(`must match ${rule["pattern"]}`)
    return Option.none()
  })

/** What a schema node accepts, from its kind or its title or identifier (never a description, which is prose). */
const expected = (ast: SchemaAST.AST): string => {
  switch (ast._tag) {
    case "StringKeyword":
      return "a string"
    case "NumberKeyword":
      return "a number"
    case "BooleanKeyword":
      return "true or false"
    case "TypeLiteral":
      return "a JSON object"
    case "TupleType":
      return "an array"
    case "Literal":
      return JSON.stringify(ast.literal)
    case "Union":
      return withoutUndefined(ast.types).map(expected).join(" or ")
    case "Refinement":
      return Option.getOrElse(SchemaAST.getIdentifierAnnotation(ast), () => expected(ast.from))
    case "Transformation":
      return expected(ast.to)
    default:
      return Option.getOrElse(SchemaAST.getIdentifierAnnotation(ast), () => "a valid value")
  }
}

/** An optional field's schema is `X | undefined`; the `undefined` is not worth a word. */
const withoutUndefined = (types: ReadonlyArray<SchemaAST.AST>) =>
  types.filter((type) => !SchemaAST.isUndefinedKeyword(type))

/**
 * An unknown field is named when its name reads as a field name; anything else a client put
 * in a key (a token, a sentence) is not repeated.
 */
const fieldNameLike = /^[A-Za-z][A-Za-z0-9_]{0,31}$/

const unknownField = (path: ReadonlyArray<PropertyKey>): FieldProblem => {
  const name = path.at(-1)
  return typeof name === "string" && fieldNameLike.test(name)
    ? { path, text: "is not an allowed field" }
    : { path: path.slice(0, -1), text: "has a field that is not allowed" }
}

const problems = (
  issue: ParseResult.ParseIssue,
  path: ReadonlyArray<PropertyKey>,
  atRoot: boolean
): Effect.Effect<ReadonlyArray<FieldProblem>> =>
  Effect.gen(function*() {
    if (issue._tag === "Pointer") return yield* problems(issue.issue, path.concat(issue.path), false)
    if (issue._tag === "Missing") return [{ path, text: "is missing" }]
    if (issue._tag === "Unexpected") return [unknownField(path)]
    if (issue._tag === "Forbidden") return [{ path, text: "cannot be checked here" }]
    const annotated = atRoot ? Option.none() : yield* annotatedMessage(issue)
    const nestedFirst = issue._tag === "Composite" ||
      (issue._tag === "Refinement" && issue.kind === "From") ||
      (issue._tag === "Transformation" && issue.kind !== "Transformation")
    if (Option.isSome(annotated) && (annotated.value.override || !nestedFirst)) {
      return [{ path, text: annotated.value.text }]
    }
    switch (issue._tag) {
      case "Type":
        return [{ path, text: `must be ${expected(issue.ast)}` }]
      case "Refinement":
        return issue.kind === "From"
          ? yield* problems(issue.issue, path, false)
          : [{ path, text: Option.getOrElse(filterRule(issue.ast), () => `must be ${expected(issue.ast)}`) }]
      case "Transformation":
        return issue.kind === "Transformation"
          ? [{ path, text: `cannot be read as ${expected(issue.ast.to)}` }]
          : yield* problems(issue.issue, path, false)
      case "Composite": {
        const members = Array.isArray(issue.issues) ? issue.issues : [issue.issues]
        if (!SchemaAST.isUnion(issue.ast)) {
          return (yield* Effect.forEach(members, (member) => problems(member, path, false))).flat()
        }
        // A union's members fail one by one: one member left (an optional field) speaks for
        // itself, otherwise the union says what it accepts.
        const candidates = members.filter((member) => !("ast" in member && SchemaAST.isUndefinedKeyword(member.ast)))
        const [only] = candidates
        return candidates.length === 1 && only !== undefined
          ? yield* problems(only, path, false)
          : [{ path, text: `must be ${expected(issue.ast)}` }]
      }
    }
  })

/** "sourceText: is missing; count: must be an integer", the first problem of each field. */
export const describeIssue = (issue: ParseResult.ParseIssue): Effect.Effect<string> =>
  Effect.map(problems(issue, [], true), (found) => {
    const byPath = new Map<string, string>()
    for (const problem of found) {
      const field = describePath(problem.path)
      if (!byPath.has(field)) byPath.set(field, field.length === 0 ? problem.text : `${field}: ${problem.text}`)
    }
    return byPath.size === 0 ? "is not valid" : Array.from(byPath.values()).join("; ")
  })

/** The `message` annotation that replaces a whole decode error with `describeIssue`. */
const valueFreeMessage: SchemaAST.MessageAnnotation = (issue) => ({ message: describeIssue(issue), override: true })

/**
 * Marks a request schema (path, query, headers or body) so that its decode errors carry only
 * value-free messages: the whole issue is described here and replaces the default text.
 */
export const withValueFreeErrors = <S extends Schema.Annotable.All>(schema: S): Schema.Annotable.Self<S> =>
  schema.annotations({ message: valueFreeMessage })

/** Whether `ast` was marked by `withValueFreeErrors` (every request schema of the API is). */
export const hasValueFreeErrors = (ast: SchemaAST.AST): boolean =>
  Option.exists(SchemaAST.getMessageAnnotation(ast), (annotation) => annotation === valueFreeMessage)
