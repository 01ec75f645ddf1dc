import { HttpClient, type HttpClientResponse } from "@effect/platform"
import {
  Clock,
  Deferred,
  Duration,
  Effect,
  FiberRef,
  HashMap,
  List,
  Option,
  Ref,
  Schema,
  type Scope,
  Stream
} from "effect"
import type { IdentityProviderSettings } from "../config/AuthSettings.js"
import { emptyKeySet, JwkSetDocument, type KeySet, keySetOf } from "./jwks.js"

/**
 * An identity provider's signing keys, fetched lazily and cached for `max-age` (clamped to the
 * `AUTH_JWKS_*` bounds). A stale set is refetched in the background while the old keys keep
 * verifying; an unknown `kid` waits for one refetch at most once per cooldown, so forged kids
 * cannot make the API hammer the provider; a failed fetch keeps the known keys. One fetch at a
 * time, in the service's scope, not the request's.
 */

/** A discovery document or key set larger than this is refused (real ones are a few KiB). */
const maxDocumentBytes = 256 * 1024

class IdentityProviderUnavailable extends Schema.TaggedError<IdentityProviderUnavailable>()(
  "IdentityProviderUnavailable",
  { reason: Schema.String }
) {}

const DiscoveryDocument = Schema.Struct({ issuer: Schema.String, jwks_uri: Schema.String })

interface CacheState {
  /** The last set fetched; undefined until one was. */
  readonly keys: KeySet | undefined
  readonly freshUntilMillis: number
  /** When the last fetch started (successful or not): the cooldown counts from here. */
  readonly lastAttemptMillis: number | undefined
  /** The key set's URL: configured, or found by discovery (once). */
  readonly jwksUrl: string | undefined
  readonly inFlight: Deferred.Deferred<void> | undefined
}

export interface IdentityProviderKeys {
  /** The keys to verify with at `nowMillis`: the first call waits for the first fetch; a stale set is refreshed in the background. */
  readonly current: (nowMillis: number) => Effect.Effect<KeySet>
  /** After a token named a `kid` the set lacks: waits for one refetch unless one ran within the cooldown. */
  readonly afterUnknownKid: (nowMillis: number) => Effect.Effect<KeySet>
  /** Completes once no fetch is under way. */
  readonly settled: Effect.Effect<void>
}

/** `Cache-Control` as a cache lifetime in seconds: `max-age`, 0 for `no-store` / `no-cache`, undefined when it says neither. */
const cacheLifetimeOf = (header: string | undefined): number | undefined => {
  if (header === undefined) return undefined
  const directives = header.toLowerCase().split(",").map((directive) => directive.trim())
  if (directives.some((directive) => directive === "no-store" || directive === "no-cache")) return 0
  for (const directive of directives) {
    const match = /^max-age="?(\d+)"?$/.exec(directive)
    if (match?.[1] !== undefined) return Number(match[1])
  }
  return undefined
}

const isHttpUrl = (value: string): boolean => {
  try {
    const url = new URL(value)
    return url.protocol === "https:" || url.protocol === "http:"
  } catch {
    return false
  }
}

export const makeIdentityProviderKeys = (
  settings: IdentityProviderSettings
): Effect.Effect<IdentityProviderKeys, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function*() {
    // A provider behind a CDN may answer with a redirect: a few are followed.
    const client = HttpClient.followRedirects(yield* HttpClient.HttpClient, 3)
    const scope = yield* Effect.scope
    const cooldownMillis = Duration.toMillis(settings.jwks.cooldown)
    const state = yield* Ref.make<CacheState>({
      keys: undefined,
      freshUntilMillis: 0,
      lastAttemptMillis: undefined,
      jwksUrl: Option.getOrUndefined(settings.jwksUrl),
      inFlight: undefined
    })

    const unavailable = (reason: string) => new IdentityProviderUnavailable({ reason })

    /** The body of a 2xx answer as text, refused past `maxDocumentBytes` (also while it streams in). */
    const boundedText = (response: HttpClientResponse.HttpClientResponse) =>
      Effect.gen(function*() {
        if (response.status < 200 || response.status > 299) return yield* unavailable(`HTTP ${response.status}`)
        const declared = Number(response.headers["content-length"] ?? "0")
        if (declared > maxDocumentBytes) return yield* unavailable(`document larger than ${maxDocumentBytes} bytes`)
        const chunks: Array<Uint8Array> = []
        yield* response.stream.pipe(
          Stream.mapError((error) => unavailable(`body could not be read (${error._tag})`)),
          Stream.runFoldEffect(0, (size, chunk) => {
            chunks.push(chunk)
            return size + chunk.length > maxDocumentBytes
              ? unavailable(`document larger than ${maxDocumentBytes} bytes`)
              : Effect.succeed(size + chunk.length)
          })
        )
        return Buffer.concat(chunks).toString("utf8")
      })

    const fetchDocument = <A, I>(what: string, url: string, schema: Schema.Schema<A, I>) =>
      client.get(url, { headers: { accept: "application/json" } }).pipe(
        Effect.mapError((error) => unavailable(`${what} request failed (${error._tag} ${error.reason})`)),
        Effect.flatMap((response) =>
          boundedText(response).pipe(
            Effect.flatMap(Schema.decodeUnknown(Schema.parseJson(schema))),
            Effect.mapError((
              error
            ) => (error._tag === "ParseError" ? unavailable(`${what} does not match its schema`) : error)),
            Effect.map((document) => ({ document, lifetime: cacheLifetimeOf(response.headers["cache-control"]) }))
          )
        ),
        Effect.timeoutFail({
          duration: settings.jwks.timeout,
          onTimeout: () => unavailable(`${what} took longer than ${Duration.toMillis(settings.jwks.timeout)} ms`)
        })
      )

    /** The key set's URL: configured, or named by the issuer's discovery document (which must name the same issuer). */
    const jwksUrl = Effect.gen(function*() {
      const known = (yield* Ref.get(state)).jwksUrl
      if (known !== undefined) return known
      const discoveryUrl = `${settings.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`
      const { document } = yield* fetchDocument("discovery", discoveryUrl, DiscoveryDocument)
      if (document.issuer !== settings.issuer) return yield* unavailable("the discovery document names another issuer")
      if (!isHttpUrl(document.jwks_uri)) {
        return yield* unavailable("the discovery document's jwks_uri is not an http(s) URL")
      }
      yield* Ref.update(state, (current) => ({ ...current, jwksUrl: document.jwks_uri }))
      return document.jwks_uri
    })

    const fetchKeys = Effect.gen(function*() {
      const { document, lifetime } = yield* fetchDocument("key set", yield* jwksUrl, JwkSetDocument)
      const keys = keySetOf(document)
      // Cache-Control's max-age counts whole seconds.
      const maxAgeSeconds = Duration.toSeconds(settings.jwks.maxAge)
      const lifetimeSeconds = Math.min(
        Math.max(lifetime ?? maxAgeSeconds, Duration.toSeconds(settings.jwks.cooldown)),
        maxAgeSeconds
      )
      const now = yield* Clock.currentTimeMillis
      yield* Ref.update(state, (current) => ({ ...current, keys, freshUntilMillis: now + lifetimeSeconds * 1000 }))
      yield* Effect.logDebug("identity provider keys fetched").pipe(
        Effect.annotateLogs({ keys: keys.keys.length, lifetimeSeconds })
      )
    }).pipe(
      Effect.catchAll((error) =>
        Effect.flatMap(Ref.get(state), (current) =>
          Effect.logWarning("identity provider keys could not be fetched; the keys fetched before stay in use").pipe(
            Effect.annotateLogs({
              reason: error.reason,
              issuer: settings.issuer,
              keysKept: current.keys?.keys.length ?? 0
            })
          ))
      )
    )

    /** Starts a fetch unless one is under way (then joins it) or one started within the cooldown (then nothing). */
    const startFetch = (nowMillis: number) =>
      Effect.gen(function*() {
        const mine = yield* Deferred.make<void>()
        const joined = yield* Ref.modify(
          state,
          (current): readonly [Deferred.Deferred<void> | undefined, CacheState] => {
            if (current.inFlight !== undefined) {
              return [current.inFlight, current]
            }
            if (
              current.lastAttemptMillis !== undefined && nowMillis - current.lastAttemptMillis < cooldownMillis
            ) {
              return [undefined, current]
            }
            return [mine, { ...current, inFlight: mine, lastAttemptMillis: nowMillis }]
          }
        )
        if (joined === mine) {
          yield* fetchKeys.pipe(
            Effect.ensuring(
              Ref.update(state, (current) => ({ ...current, inFlight: undefined })).pipe(
                Effect.zipRight(Deferred.succeed(mine, undefined))
              )
            ),
            // The fetch serves every request after this one: its own trace, not the request's spans and log annotations.
            Effect.withSpan("identity_provider.fetch_keys", { root: true, attributes: { issuer: settings.issuer } }),
            Effect.locally(FiberRef.currentLogSpan, List.empty()),
            Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty()),
            Effect.forkIn(scope)
          )
        }
        return joined
      })

    const fetchedKeys = Effect.map(Ref.get(state), (current) =>
      current.keys ?? emptyKeySet)

    const waitForFetch = (nowMillis: number) =>
      Effect.flatMap(
        startFetch(nowMillis),
        (pending) => (pending === undefined ? Effect.void : Deferred.await(pending))
      )

    return {
      current: (nowMillis) =>
        Effect.flatMap(Ref.get(state), (current) => {
          if (current.keys === undefined) {
            return Effect.zipRight(waitForFetch(nowMillis), fetchedKeys)
          }
          const coolingDown = current.lastAttemptMillis !== undefined &&
            nowMillis - current.lastAttemptMillis < cooldownMillis
          if (nowMillis < current.freshUntilMillis || current.inFlight !== undefined || coolingDown) {
            return Effect.succeed(current.keys)
          }
          return Effect.as(startFetch(nowMillis), current.keys)
        }),
      afterUnknownKid: (nowMillis) =>
        Effect.zipRight(waitForFetch(nowMillis), fetchedKeys),
      settled: Effect.flatMap(
        Ref.get(state),
        (current) => (current.inFlight === undefined ? Effect.void : Deferred.await(current.inFlight))
      )
    } satisfies IdentityProviderKeys
  })
