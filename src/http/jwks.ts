import { Either, Schema } from "effect"
import { constants, createPublicKey, type KeyObject, verify } from "node:crypto"
import { type AsymmetricAlgorithm, asymmetricAlgorithms } from "../config/AuthSettings.js"

/**
 * An identity provider's JSON Web Key Set as `node:crypto` key objects, imported once per fetch
 * so that a request only looks a key up and verifies. Which key a token may use follows jose's
 * `createLocalJWKSet`: the token's `kid` when it has one, a key
 * type (and curve) that fits its `alg`, `use` absent or `sig`, `key_ops` including `verify`,
 * the key's own `alg` (when present) equal to the token's, and exactly one such key.
 */

interface AlgorithmSpec {
  readonly kty: "RSA" | "EC" | "OKP"
  /** The JWK curve the algorithm requires. */
  readonly crv?: "P-256" | "P-384" | "P-521" | "Ed25519"
  /** The digest; none for EdDSA, which hashes inside the signature scheme. */
  readonly hash: "sha256" | "sha384" | "sha512" | null
  /** RSASSA-PSS salt length (bytes). */
  readonly pssSaltLength?: number
  /** ECDSA signatures are `r || s` of fixed length (JWS), EdDSA ones 64 bytes. */
  readonly signatureBytes?: number
}

const algorithmSpecs: Readonly<Record<AsymmetricAlgorithm, AlgorithmSpec>> = {
  RS256: { kty: "RSA", hash: "sha256" },
  RS384: { kty: "RSA", hash: "sha384" },
  RS512: { kty: "RSA", hash: "sha512" },
  PS256: { kty: "RSA", hash: "sha256", pssSaltLength: 32 },
  PS384: { kty: "RSA", hash: "sha384", pssSaltLength: 48 },
  PS512: { kty: "RSA", hash: "sha512", pssSaltLength: 64 },
  ES256: { kty: "EC", crv: "P-256", hash: "sha256", signatureBytes: 64 },
  ES384: { kty: "EC", crv: "P-384", hash: "sha384", signatureBytes: 96 },
  ES512: { kty: "EC", crv: "P-521", hash: "sha512", signatureBytes: 132 },
  EdDSA: { kty: "OKP", crv: "Ed25519", hash: null, signatureBytes: 64 }
}

/** RFC 7518 §3.3 and jose: an RSA key shorter than this is refused. */
const minRsaBits = 2048

export interface VerificationKey {
  /** The JWK's `kid` as published (jose compares it with `===`, whatever its type). */
  readonly kid: unknown
  /** The algorithms the JWK's metadata lets it verify. */
  readonly usableFor: ReadonlySet<AsymmetricAlgorithm>
  /** Undefined when the JWK is not a usable public key (private, malformed, too short): a token that selects it is refused. */
  readonly key: KeyObject | undefined
}

export interface KeySet {
  readonly keys: ReadonlyArray<VerificationKey>
  /** The string `kid`s published: a token naming another one may mean the provider rotated its keys. */
  readonly kids: ReadonlySet<string>
}

export const emptyKeySet: KeySet = { keys: [], kids: new Set() }

/** A JWK Set document: an object whose `keys` are objects (each key's members are checked one by one). */
export const JwkSetDocument = Schema.Struct({
  keys: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type JwkSetDocument = typeof JwkSetDocument.Type

/** The public key material `node:crypto` imports, per key type. */
const PublicJwk = Schema.Union(
  Schema.Struct({ kty: Schema.Literal("RSA"), n: Schema.String, e: Schema.String }),
  Schema.Struct({ kty: Schema.Literal("EC"), crv: Schema.String, x: Schema.String, y: Schema.String }),
  Schema.Struct({ kty: Schema.Literal("OKP"), crv: Schema.String, x: Schema.String })
)
const decodePublicJwk = Schema.decodeUnknownEither(PublicJwk)

/** jose's checks of `ext` and `key_ops` (a unique list of strings that includes `verify`). */
const metadataUsable = (jwk: Readonly<Record<string, unknown>>): boolean => {
  if (jwk.ext !== undefined && typeof jwk.ext !== "boolean") return false
  const keyOps = jwk.key_ops
  if (keyOps === undefined) return true
  return Array.isArray(keyOps) && keyOps.every((op, index) => typeof op === "string" && keyOps.indexOf(op) === index) &&
    keyOps.includes("verify")
}

const usableAlgorithms = (jwk: Readonly<Record<string, unknown>>): ReadonlySet<AsymmetricAlgorithm> => {
  if (!metadataUsable(jwk) || (jwk.use !== undefined && jwk.use !== "sig")) return new Set()
  return new Set(
    asymmetricAlgorithms.filter((algorithm) => {
      const spec = algorithmSpecs[algorithm]
      return spec.kty === jwk.kty && (jwk.alg === undefined || jwk.alg === algorithm) &&
        (spec.crv === undefined || spec.crv === jwk.crv)
    })
  )
}

const curveNames: Readonly<Record<string, string>> = {
  "P-256": "prime256v1",
  "P-384": "secp384r1",
  "P-521": "secp521r1"
}

/**
 * The JWK as a public `KeyObject`, or undefined: a private key (`d`), a `key_ops` that asks for
 * more than verifying (jose's WebCrypto import refuses it), material that does not import, or a
 * key that does not match what its `kty` and `crv` say.
 */
const importKey = (jwk: Readonly<Record<string, unknown>>): KeyObject | undefined => {
  if (jwk.d) return undefined
  if (Array.isArray(jwk.key_ops) && jwk.key_ops.some((op) => op !== "verify")) return undefined
  const material = decodePublicJwk(jwk)
  if (Either.isLeft(material)) return undefined
  try {
    const key = createPublicKey({ key: material.right, format: "jwk" })
    const details = key.asymmetricKeyDetails
    switch (material.right.kty) {
      case "RSA":
        return key.asymmetricKeyType === "rsa" && (details?.modulusLength ?? 0) >= minRsaBits ? key : undefined
      case "EC":
        return key.asymmetricKeyType === "ec" && details?.namedCurve === curveNames[material.right.crv]
          ? key
          : undefined
      case "OKP":
        return key.asymmetricKeyType === "ed25519" ? key : undefined
    }
  } catch {
    return undefined
  }
}

/** The key set of a decoded JWK Set document; keys that cannot be used are kept as unusable (jose would select and refuse them too). */
export const keySetOf = (document: JwkSetDocument): KeySet => {
  const keys = document.keys.map((jwk): VerificationKey => {
    const usableFor = usableAlgorithms(jwk)
    return { kid: jwk.kid, usableFor, key: usableFor.size === 0 ? undefined : importKey(jwk) }
  })
  const kids = new Set(keys.flatMap((key) => (typeof key.kid === "string" ? [key.kid] : [])))
  return { keys, kids }
}

export type KeySelection =
  | { readonly _tag: "Selected"; readonly key: KeyObject }
  /** The token names a `kid` the set does not publish: the set may be out of date. */
  | { readonly _tag: "UnknownKid" }
  | { readonly _tag: "Refused"; readonly reason: string }

/** The one key a token with this `alg` and `kid` may be verified with. */
export const selectKey = (set: KeySet, algorithm: AsymmetricAlgorithm, kid: unknown): KeySelection => {
  if (typeof kid === "string" && !set.kids.has(kid)) return { _tag: "UnknownKid" }
  const candidates = set.keys.filter((key) =>
    (kid === undefined || (typeof kid === "string" && key.kid === kid)) && key.usableFor.has(algorithm)
  )
  if (candidates.length === 0) return { _tag: "Refused", reason: "no key of the set fits the token's alg and kid" }
  if (candidates.length > 1) return { _tag: "Refused", reason: "several keys of the set fit the token's alg and kid" }
  const key = candidates[0]?.key
  return key === undefined
    ? { _tag: "Refused", reason: "the selected key is not a usable public key" }
    : { _tag: "Selected", key }
}

export const signatureValid = (
  algorithm: AsymmetricAlgorithm,
  key: KeyObject,
  signingInput: string,
  signature: Buffer
): boolean => {
  const spec = algorithmSpecs[algorithm]
  if (spec.signatureBytes !== undefined && signature.length !== spec.signatureBytes) return false
  const data = Buffer.from(signingInput, "latin1")
  try {
    switch (spec.kty) {
      case "RSA":
        return spec.pssSaltLength === undefined
          ? verify(spec.hash, data, key, signature)
          : verify(
            spec.hash,
            data,
            { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: spec.pssSaltLength },
            signature
          )
      case "EC":
        return verify(spec.hash, data, { key, dsaEncoding: "ieee-p1363" }, signature)
      case "OKP":
        return verify(null, data, key, signature)
    }
  } catch {
    return false
  }
}
