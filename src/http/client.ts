import { Sse } from "@effect/experimental"
import { HttpApiClient, HttpClient, type HttpClientError, HttpClientRequest } from "@effect/platform"
import { Data, Effect, type ParseResult, Schema, Stream } from "effect"
import { AiJobApi } from "./Api.js"
import { JobStatusResponse } from "./ApiSchemas.js"

/**
 * A typed client for the whole HTTP API (every group and endpoint of `AiJobApi`), sending
 * `token` as the bearer token. Needs an `HttpClient` (e.g. `FetchHttpClient.layer`).
 */
export const makeAiJobClient = (options: { readonly baseUrl: string; readonly token?: string | undefined }) =>
  HttpApiClient.make(AiJobApi, {
    baseUrl: options.baseUrl,
    transformClient: (client) =>
      options.token === undefined ? client : HttpClient.mapRequest(client, HttpClientRequest.bearerToken(options.token))
  })

/** One event of a job's stream: its status and the id to reconnect with. */
export interface JobStatusEvent {
  readonly id: string
  readonly status: JobStatusResponse
}

/** The stream was refused: 404 (not the caller's job, or none), 401, ... */
export class JobEventStreamRefused extends Data.TaggedError("JobEventStreamRefused")<{
  readonly status: number
  readonly body: string
}> {}

const decodeStatus = Schema.decodeUnknown(Schema.parseJson(JobStatusResponse))

/**
 * `GET /api/ai/jobs/:jobId/events` as a Stream of statuses: the current one, then each change;
 * it ends after the terminal status (or at once when `lastEventId` names the terminal status the
 * caller already has). Heartbeat comments are skipped.
 */
export const jobStatusStream = (options: {
  readonly baseUrl: string
  readonly token: string
  readonly jobId: string
  readonly lastEventId?: string | undefined
}): Stream.Stream<
  JobStatusEvent,
  JobEventStreamRefused | HttpClientError.HttpClientError | ParseResult.ParseError,
  HttpClient.HttpClient
> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      const request = HttpClientRequest.get(
        `${options.baseUrl}/api/ai/jobs/${encodeURIComponent(options.jobId)}/events`
      ).pipe(
        HttpClientRequest.bearerToken(options.token),
        HttpClientRequest.setHeader("accept", "text/event-stream"),
        options.lastEventId === undefined ? (r) => r : HttpClientRequest.setHeader("last-event-id", options.lastEventId)
      )
      const response = yield* client.execute(request)
      if (response.status === 204) return Stream.empty
      if (response.status !== 200) {
        return yield* new JobEventStreamRefused({ status: response.status, body: yield* response.text })
      }
      return response.stream.pipe(
        Stream.decodeText(),
        Stream.pipeThroughChannel(Sse.makeChannel()),
        Stream.filter((event) => event.event === "status"),
        Stream.mapEffect((event) => Effect.map(decodeStatus(event.data), (status) => ({ id: event.id ?? "", status })))
      )
    })
  )
