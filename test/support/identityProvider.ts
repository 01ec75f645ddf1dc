import { Effect, type Scope } from "effect"
import { type JWTPayload, SignJWT } from "jose"
import { generateKeyPairSync, type JsonWebKey, type KeyObject } from "node:crypto"
import type { Server } from "node:http"
import { createServer } from "node:http"
import type { AsymmetricAlgorithm } from "../../src/config/AuthSettings.js"

/**
 * A local OpenID Connect identity provider for tests and benches: signing keys made here, tokens
 * signed with jose, and an HTTP server on 127.0.0.1 serving the discovery document and the JWK
 * Set, counting what it serves, whose keys can change and which can fail or go away.
 */

export interface SigningKey {
  readonly kid: string
  readonly alg: AsymmetricAlgorithm
  readonly privateKey: KeyObject
  readonly publicKey: KeyObject
  /** The public JWK as the provider publishes it (`kid`, `use: sig`, plus `extra`). */
  readonly jwk: JsonWebKey
}

const keyPairFor = (alg: AsymmetricAlgorithm, rsaBits: number) => {
  if (alg.startsWith("RS") || alg.startsWith("PS")) return generateKeyPairSync("rsa", { modulusLength: rsaBits })
  if (alg === "ES256") return generateKeyPairSync("ec", { namedCurve: "P-256" })
  if (alg === "ES384") return generateKeyPairSync("ec", { namedCurve: "P-384" })
  if (alg === "ES512") return generateKeyPairSync("ec", { namedCurve: "P-521" })
  return generateKeyPairSync("ed25519")
}

/** A new key pair for `alg`; `jwk` members in `extra` are published as given (`use`, `alg`, ...). */
export const makeSigningKey = (
  alg: AsymmetricAlgorithm,
  kid: string,
  options: { readonly rsaBits?: number; readonly extra?: Readonly<Record<string, unknown>> } = {}
): SigningKey => {
  const { privateKey, publicKey } = keyPairFor(alg, options.rsaBits ?? 2048)
  return {
    kid,
    alg,
    privateKey,
    publicKey,
    jwk: { ...publicKey.export({ format: "jwk" }), kid, use: "sig", ...options.extra }
  }
}

/** Signs `claims` with `key` (header `alg` and `kid` from the key unless `header` says otherwise). */
export const signWith = (
  key: SigningKey,
  claims: JWTPayload,
  header: Readonly<Record<string, unknown>> = {}
): Effect.Effect<string> =>
  Effect.promise(() =>
    new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT", ...header }).sign(key.privateKey)
  )

export interface IdentityProviderServer {
  /** `http://127.0.0.1:{port}/realms/{realm}`: the `iss` of its tokens. */
  readonly issuer: string
  readonly jwksUrl: string
  /** Requests served so far, per document. */
  readonly served: () => { readonly discovery: number; readonly jwks: number }
  /** Replaces the published keys. */
  readonly publish: (keys: ReadonlyArray<SigningKey>) => void
  /** `Cache-Control` of the key set (none when undefined). */
  readonly setCacheControl: (value: string | undefined) => void
  /** `failing`: every request answers 503; `up`: serves again. */
  readonly setMode: (mode: "up" | "failing") => void
  /** Closes the listener and every connection: the provider is unreachable from now on. */
  readonly shutDown: Effect.Effect<void>
}

const closeServer = (server: Server) =>
  Effect.async<void>((resume) => {
    if (!server.listening) return resume(Effect.void)
    server.closeAllConnections()
    server.close(() => resume(Effect.void))
  })

/** The provider on a free port of 127.0.0.1 for the scope, publishing `keys`. */
export const startIdentityProvider = (
  keys: ReadonlyArray<SigningKey>,
  options: {
    readonly realm?: string
    readonly cacheControl?: string
    readonly discoveryIssuer?: (issuer: string) => string
  } = {}
): Effect.Effect<IdentityProviderServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const realmPath = `/realms/${options.realm ?? "learning"}`
    let published = keys
    let cacheControl = options.cacheControl
    let mode: "up" | "failing" = "up"
    const served = { discovery: 0, jwks: 0 }
    let issuer = ""
    const server = createServer((req, res) => {
      if (mode === "failing") {
        res.writeHead(503).end()
        return
      }
      if (req.url === `${realmPath}/.well-known/openid-configuration`) {
        served.discovery += 1
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({
          issuer: options.discoveryIssuer?.(issuer) ?? issuer,
          jwks_uri: `${issuer}/protocol/openid-connect/certs`,
          id_token_signing_alg_values_supported: ["RS256", "ES256", "EdDSA"]
        }))
        return
      }
      if (req.url === `${realmPath}/protocol/openid-connect/certs`) {
        served.jwks += 1
        res.writeHead(200, {
          "content-type": "application/json",
          ...(cacheControl === undefined ? {} : { "cache-control": cacheControl })
        })
        res.end(JSON.stringify({ keys: published.map((key) => key.jwk) }))
        return
      }
      res.writeHead(404).end()
    })
    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
        })
      }),
      () => closeServer(server)
    )
    issuer = `http://127.0.0.1:${port}${realmPath}`
    return {
      issuer,
      jwksUrl: `${issuer}/protocol/openid-connect/certs`,
      served: () => ({ ...served }),
      publish: (next) => {
        published = next
      },
      setCacheControl: (value) => {
        cacheControl = value
      },
      setMode: (next) => {
        mode = next
      },
      shutDown: closeServer(server)
    }
  })
