// Mutation testing (`npm run mutate`): not part of `npm test`, it takes far longer than the suite.
// `npm run mutate -- --incremental` reuses reports/mutation/incremental.json and only re-tests
// mutants whose code or covering tests changed; `--mutate 'src/domain/**/*.ts'` narrows the scope.
// MUTATE_REPORT=name writes reports/mutation/name.{json,html}, so a scope run in parts keeps each part.
const reportName = process.env.MUTATE_REPORT ?? "mutation"

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutation.config.ts", related: true },
  coverageAnalysis: "perTest",
  // A static mutant (module-level code: schemas, constants) is active before any test starts, so
  // each one reruns every test: about half the mutants and nearly all the time. They are left out
  // (reported as ignored) unless MUTATE_STATIC=1.
  ignoreStatic: process.env.MUTATE_STATIC !== "1",
  mutate: [
    "src/domain/**/*.ts",
    "src/pipeline/**/*.ts",
    "src/layers/memory/**/*.ts",
    "src/layers/mysql/MysqlOutboxRepository.ts",
    "src/layers/mysql/MysqlAiJobLifecycleRepository.ts",
    "src/layers/mysql/lifecycle/*.ts",
    "src/layers/mysql/MysqlUnitOfWork.ts"
  ],
  // Two shared cores: one sandbox at a time unless the machine is free (STRYKER_CONCURRENCY=2).
  concurrency: Number(process.env.STRYKER_CONCURRENCY ?? 1),
  timeoutMS: 20_000,
  timeoutFactor: 2,
  incrementalFile: "reports/mutation/incremental.json",
  tempDirName: ".stryker-tmp",
  ignorePatterns: ["/.stryker-tmp*"],
  cleanTempDir: "always",
  reporters: ["progress", "clear-text", "html", "json"],
  htmlReporter: { fileName: `reports/mutation/${reportName}.html` },
  jsonReporter: { fileName: `reports/mutation/${reportName}.json` },
  clearTextReporter: { allowColor: false, logTests: false, maxTestsToLog: 0 },
  thresholds: { high: 85, low: 70, break: null }
}
