import { feynmanBody, flashcardBody, learningAnalysisBody } from "./harness.js"

export interface Route {
  readonly method: string
  readonly path: string
  readonly body?: unknown
}

/** Every route of the jobs group, for `jobId`. */
export const jobRoutes = (jobId: string): ReadonlyArray<Route> => [
  { method: "GET", path: `/api/ai/jobs/${jobId}` },
  { method: "GET", path: `/api/ai/jobs/${jobId}/artifacts` },
  { method: "POST", path: `/api/ai/jobs/${jobId}/cancel` }
]

/** Every route that needs a user token (USER or SUPER_ADMIN). */
export const userRoutes = (jobId: string): ReadonlyArray<Route> => [
  { method: "POST", path: "/api/ai/flashcard-generations", body: flashcardBody() },
  { method: "POST", path: "/api/ai/feynman-evaluations", body: feynmanBody() },
  { method: "POST", path: "/api/ai/learning-analyses", body: learningAnalysisBody() },
  { method: "POST", path: "/api/ai/flashcard-generations/batch", body: { items: [flashcardBody()] } },
  { method: "POST", path: "/api/ai/feynman-evaluations/batch", body: { items: [feynmanBody()] } },
  { method: "POST", path: "/api/ai/learning-analyses/batch", body: { items: [learningAnalysisBody()] } },
  { method: "GET", path: "/api/ai/jobs" },
  ...jobRoutes(jobId),
  { method: "PUT", path: "/api/ai/credentials/deepseek", body: { apiKey: "sk-test-0123456789" } },
  { method: "DELETE", path: "/api/ai/credentials/deepseek" }
]

/** Every SUPER_ADMIN route. */
export const adminRoutes = (jobId: string, eventId: string): ReadonlyArray<Route> => [
  { method: "GET", path: "/admin-api/ai/jobs" },
  { method: "GET", path: `/admin-api/ai/jobs/${jobId}` },
  { method: "POST", path: `/admin-api/ai/jobs/${jobId}/retry` },
  { method: "GET", path: "/admin-api/ai/outbox" },
  { method: "POST", path: `/admin-api/ai/outbox/${eventId}/replay` },
  { method: "GET", path: "/admin-api/ai/workers" },
  { method: "GET", path: "/admin-api/ai/outbox/events?status=dead" },
  { method: "POST", path: "/admin-api/ai/outbox/replay-dead" },
  { method: "GET", path: `/admin-api/ai/jobs/${jobId}/timeline` },
  { method: "GET", path: "/admin-api/ai/stats" }
]

export const internalRoute = (credentialId: string, jobId: string): Route => ({
  method: "POST",
  path: `/internal/credentials/${credentialId}/resolve`,
  body: { jobId }
})

/** Every route behind a bearer token of any kind. */
export const protectedRoutes = (jobId: string, eventId: string): ReadonlyArray<Route> => [
  ...userRoutes(jobId),
  ...adminRoutes(jobId, eventId),
  internalRoute("00000000-0000-7000-8000-000000000000", jobId)
]
