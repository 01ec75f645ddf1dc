import { describe, expect, it } from "@effect/vitest"
import { importViolations, sourceFiles } from "../../support/importRules.js"

describe("the layout's import rule", () => {
  it("holds over src/", () => {
    const files = sourceFiles()
    expect(files.length).toBeGreaterThan(100)
    expect(importViolations(files)).toEqual([])
  })

  it("fails on a planted src/layers → src/pipeline import", () => {
    const planted = {
      path: "src/layers/mysql/Planted.ts",
      text: `import { runJob } from "../../pipeline/engine.js"\nexport const planted = runJob\n`
    }
    expect(importViolations([...sourceFiles(), planted])).toEqual([
      { from: "src/layers/mysql/Planted.ts", specifier: "../../pipeline/engine.js", rule: "src/layers must not import src/pipeline" }
    ])
  })

  it("fails on the pipeline or the API importing an adapter, or an adapter's package", () => {
    const planted = [
      { path: "src/pipeline/Planted.ts", text: `import { MysqlQuotas } from "../layers/mysql/MysqlQuotas.js"\n` },
      { path: "src/http/Planted.ts", text: `import type { Queue } from "bullmq"\n` },
      { path: "src/layers/memory/Planted.ts", text: `export { BullMqJobQueueLive } from "../bullmq/BullMqJobQueue.js"\n` }
    ]
    expect(importViolations(planted).map((v) => v.rule)).toEqual([
      "src/pipeline must not import src/layers",
      "src/http must not load bullmq (an adapter's package)",
      "src/layers/memory must not import src/layers/bullmq"
    ])
  })
})
