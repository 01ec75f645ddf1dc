import { Context, type Effect } from "effect"
import type { CredentialMode } from "../domain/CredentialMode.js"

/** Which provider and model serve a call, and with which sampling settings. */
export interface ModelRoute {
  readonly provider: string
  readonly model: string
  readonly temperature: number
  readonly maxTokens: number | undefined
  readonly jsonMode: boolean
}

/** ADR 9 ModelRouter: job type + credential mode → provider and model, from configuration. */
export class ModelRouter extends Context.Tag("ai-job-engine/ModelRouter")<
  ModelRouter,
  {
    readonly route: (request: { readonly jobType: string; readonly credentialMode: CredentialMode }) => Effect.Effect<ModelRoute>
  }
>() {}
