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
      {
        from: "src/layers/mysql/Planted.ts",
        specifier: "../../pipeline/engine.js",
        rule: "src/layers must not import src/pipeline"
      }
    ])
  })

  it("fails on the pipeline or the API importing an adapter, or an adapter's package", () => {
    const planted = [
      { path: "src/pipeline/Planted.ts", text: `import { MysqlQuotas } from "../layers/mysql/MysqlQuotas.js"\n` },
      { path: "src/http/Planted.ts", text: `import type { Queue } from "bullmq"\n` },
      {
        path: "src/layers/memory/Planted.ts",
        text: `export { BullMqJobQueueLive } from "../bullmq/BullMqJobQueue.js"\n`
      }
    ]
    expect(importViolations(planted).map((v) => v.rule)).toEqual([
      "src/pipeline must not import src/layers",
      "src/http must not load bullmq (an adapter's package)",
      "src/layers/memory must not import src/layers/bullmq"
    ])
  })

  it("holds a subfolder of services or the pipeline to its room's rule", () => {
    const planted = [
      {
        path: "src/pipeline/outbox/Planted.ts",
        text: `import { OutboxRepository } from "../../services/outbox/OutboxRepository.js"
import { MysqlOutboxRepositoryLive } from "../../layers/mysql/MysqlOutboxRepository.js"
`
      },
      {
        path: "src/services/outbox/Planted.ts",
        text: `import { JobQueue } from "../JobQueue.js"
import { makeDispatcher } from "../../pipeline/outbox/dispatcher.js"
`
      }
    ]
    expect(importViolations(planted).map((v) => v.rule)).toEqual([
      "src/pipeline must not import src/layers",
      "src/services must not import src/pipeline"
    ])
  })

  it("keeps the OpenTelemetry packages to src/layers/telemetry and src/main", () => {
    const planted = [
      {
        path: "src/pipeline/Planted.ts",
        text: `import { trace } from "@opentelemetry/api"
`
      },
      {
        path: "src/services/Planted.ts",
        text: `import { Tracer } from "@effect/opentelemetry"
`
      },
      {
        path: "src/layers/mysql/Planted.ts",
        text: `import type { SpanProcessor } from "@opentelemetry/sdk-trace-base"
`
      },
      {
        path: "src/simulation/Planted.ts",
        text: `import { NodeSdk } from "@effect/opentelemetry/NodeSdk"
`
      },
      {
        path: "src/layers/telemetry/Planted.ts",
        text: `import { NodeSdk } from "@effect/opentelemetry"
`
      },
      {
        path: "src/main/Planted.ts",
        text: `import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
`
      }
    ]
    expect(importViolations(planted).map((v) => v.rule)).toEqual([
      "src/pipeline must not load @opentelemetry/* (only src/layers/telemetry and src/main)",
      "src/services must not load @effect/opentelemetry (only src/layers/telemetry and src/main)",
      "src/layers/mysql must not load @opentelemetry/* (only src/layers/telemetry and src/main)",
      "src/simulation must not load @effect/opentelemetry (only src/layers/telemetry and src/main)"
    ])
  })
})
