/**
 * `npm run mutate:summary [-- a.json b.json]`: reads Stryker's JSON report(s) (default
 * reports/mutation/mutation.json; several when the scope was run in parts, a later one winning
 * for a file they share) and writes reports/mutation/summary.md: the score per directory and
 * every surviving or uncovered mutant with its line, readable without the HTML report.
 */
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema } from "effect"

const reportPaths = process.argv.length > 2 ? process.argv.slice(2) : ["reports/mutation/mutation.json"]
const summaryPath = "reports/mutation/summary.md"

const Position = Schema.Struct({ line: Schema.Number, column: Schema.Number })
const Mutant = Schema.Struct({
  mutatorName: Schema.String,
  replacement: Schema.optional(Schema.String),
  status: Schema.String,
  location: Schema.Struct({ start: Position, end: Position })
})
const MutationReport = Schema.Struct({
  files: Schema.Record({
    key: Schema.String,
    value: Schema.Struct({ source: Schema.String, mutants: Schema.Array(Mutant) })
  })
})
const decodeReport = Schema.decodeUnknown(Schema.parseJson(MutationReport))

/** The MySQL adapters in scope are three files of a larger folder: each one is its own group. */
const groupOf = (file: string) => file.startsWith("src/layers/mysql/") ? file : file.split("/").slice(0, -1).join("/")

interface Tally {
  killed: number
  survived: number
  noCoverage: number
  other: number
}
const emptyTally = (): Tally => ({ killed: 0, survived: 0, noCoverage: 0, other: 0 })

const count = (tally: Tally, status: string) => {
  if (status === "Killed" || status === "Timeout") tally.killed++
  else if (status === "Survived") tally.survived++
  else if (status === "NoCoverage") tally.noCoverage++
  else tally.other++
}

/** Stryker's mutation score: detected over detected + undetected (compile/runtime errors and ignored left out). */
const score = (tally: Tally) => {
  const valid = tally.killed + tally.survived + tally.noCoverage
  return valid === 0 ? "n/a" : `${((100 * tally.killed) / valid).toFixed(1)} %`
}

const row = (name: string, tally: Tally) =>
  `| ${name} | ${score(tally)} | ${tally.killed} | ${tally.survived} | ${tally.noCoverage} |`

const oneLine = (text: string) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > 90 ? `${flat.slice(0, 87)}...` : flat
}

const summarise = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const reports = yield* Effect.forEach(reportPaths, (path) => Effect.flatMap(fs.readFileString(path), decodeReport))
  // A file in a later report (a re-run of part of the scope) replaces its earlier result.
  const files = [...new Map(reports.flatMap((report) => Object.entries(report.files))).entries()]
  const total = emptyTally()
  const groups = new Map<string, Tally>()
  const undetected: Array<string> = []

  for (const [file, { source, mutants }] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const lines = source.split("\n")
    const group = groups.get(groupOf(file)) ?? emptyTally()
    groups.set(groupOf(file), group)
    for (const mutant of [...mutants].sort((a, b) => a.location.start.line - b.location.start.line)) {
      count(total, mutant.status)
      count(group, mutant.status)
      if (mutant.status === "Survived" || mutant.status === "NoCoverage") {
        const original = lines[mutant.location.start.line - 1] ?? ""
        undetected.push(
          `- ${file}:${mutant.location.start.line} ${mutant.status} ${mutant.mutatorName}` +
            ` \`${oneLine(original)}\` -> \`${oneLine(mutant.replacement ?? "")}\``
        )
      }
    }
  }

  const summary = [
    "# Mutation testing summary",
    "",
    "| scope | score | killed (incl. timeout) | survived | no coverage |",
    "| --- | --- | --- | --- | --- |",
    ...[...groups.entries()].map(([name, tally]) => row(name, tally)),
    row("**all**", total),
    "",
    `## Surviving and uncovered mutants (${undetected.length})`,
    "",
    ...undetected,
    ""
  ].join("\n")
  yield* fs.writeFileString(summaryPath, summary)
  yield* Console.log(summary.split("\n## ")[0])
  yield* Console.log(`${undetected.length} undetected mutants listed in ${summaryPath}`)
})

NodeRuntime.runMain(summarise.pipe(Effect.provide(NodeContext.layer)))
