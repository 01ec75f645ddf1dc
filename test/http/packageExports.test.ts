import { describe, expect, it } from "@effect/vitest"
import { AiJobApi } from "ai-job-engine/api"
import { jobStatusStream, makeAiJobClient } from "ai-job-engine/client"
import * as ApiModule from "../../src/http/Api.js"
import * as ClientModule from "../../src/http/client.js"

// An app imports the typed client by the package's name (package.json "exports"), not a path into src/.
describe("package exports", () => {
  it("names the typed client, its SSE stream and the API definition", () => {
    expect(makeAiJobClient).toBe(ClientModule.makeAiJobClient)
    expect(jobStatusStream).toBe(ClientModule.jobStatusStream)
    expect(AiJobApi).toBe(ApiModule.AiJobApi)
  })
})
