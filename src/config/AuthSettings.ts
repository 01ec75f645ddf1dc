import { Array as Arr, Config, ConfigError, Context, Duration, Effect, Either, Layer, Option, Redacted } from "effect"
import { positiveMillisDuration, positiveSecondsDuration } from "./configValues.js"

/**
 * Who may sign the API's bearer tokens: the shared HS256 secret (`AUTH_JWT_SECRET`, for the
 * embedded mode and one backend minting its own tokens), an OpenID Connect identity provider
 * (`AUTH_ISSUER`: its keys found by discovery, or at `AUTH_JWKS_URL`), or both. At least one
 * must be configured; with both, a token's `alg` says which one checks it.
 */

/** The asymmetric JWS algorithms an identity provider's tokens may use (never HS*: that is the secret's). */
export const asymmetricAlgorithms = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA"
] as const
export type AsymmetricAlgorithm = (typeof asymmetricAlgorithms)[number]

const isAsymmetricAlgorithm = (value: string): value is AsymmetricAlgorithm =>
  asymmetricAlgorithms.some((algorithm) => algorithm === value)

export interface JwksCacheSettings {
  /** `AUTH_JWKS_MAX_AGE_S`: the longest a fetched key set is used before it is fetched again (a shorter `Cache-Control: max-age` wins). */
  readonly maxAge: Duration.Duration
  /** `AUTH_JWKS_COOLDOWN_S`: the least time between two fetches (the floor of `max-age`; an unknown `kid` refetches at most this often). */
  readonly cooldown: Duration.Duration
  /** `AUTH_JWKS_TIMEOUT_MS`: one discovery or key-set request's time limit. */
  readonly timeout: Duration.Duration
}

export interface IdentityProviderSettings {
  /** `AUTH_ISSUER`: the `iss` every token must carry, exactly; discovery reads `{issuer}/.well-known/openid-configuration`. */
  readonly issuer: string
  /** `AUTH_JWKS_URL`: the key set's URL, instead of the one discovery names. */
  readonly jwksUrl: Option.Option<string>
  /** `AUTH_AUDIENCE`: a token must name one of these in its audience claim. */
  readonly audiences: Arr.NonEmptyReadonlyArray<string>
  /** `AUTH_AUDIENCE_CLAIM` (default `aud`): where the audience is (Cognito access tokens carry `client_id`). */
  readonly audienceClaim: string
  /** `AUTH_ALGORITHMS` (default RS256, ES256, EdDSA): the only `alg` values accepted from the provider. */
  readonly algorithms: Arr.NonEmptyReadonlyArray<AsymmetricAlgorithm>
  /** `AUTH_ROLE_CLAIM` (default `role`): a dotted path to a string or an array of strings. */
  readonly roleClaim: string
  /** `AUTH_ADMIN_ROLE` (default `SUPER_ADMIN`): the role claim value that makes a caller SUPER_ADMIN. */
  readonly adminRole: string
  /** `AUTH_SUBJECT_CLAIM` (default `sub`): the claim that is the user id (same rule as `sub`). */
  readonly subjectClaim: string
  /** `AUTH_CLOCK_SKEW_S` (default 30): how far the provider's clock may be from ours for `exp` and `nbf`, in whole seconds. */
  readonly clockSkew: Duration.Duration
  readonly jwks: JwksCacheSettings
}

export interface AuthSettingsShape {
  /** `AUTH_JWT_SECRET`: HS256 tokens are accepted only when it is set. */
  readonly jwtSecret: Option.Option<Redacted.Redacted<string>>
  /** Tokens of an OIDC identity provider are accepted only when `AUTH_ISSUER` is set. */
  readonly identityProvider: Option.Option<IdentityProviderSettings>
}

/** `AUTH_JWT_SECRET` as every reader takes it: at least 32 characters. */
export const jwtSecretConfig = Config.redacted("AUTH_JWT_SECRET").pipe(
  Config.validate({
    message: "AUTH_JWT_SECRET must be at least 32 characters",
    validation: (value) => Redacted.value(value).length >= 32
  })
)

export const defaultJwksCache: JwksCacheSettings = {
  maxAge: Duration.seconds(600),
  cooldown: Duration.seconds(30),
  timeout: Duration.seconds(5)
}

/** What an identity provider's settings default to, beside the three that have no default. */
export const identityProviderDefaults = {
  jwksUrl: Option.none<string>(),
  audienceClaim: "aud",
  algorithms: Arr.make<[AsymmetricAlgorithm, ...Array<AsymmetricAlgorithm>]>("RS256", "ES256", "EdDSA"),
  roleClaim: "role",
  adminRole: "SUPER_ADMIN",
  subjectClaim: "sub",
  clockSkew: Duration.seconds(30),
  jwks: defaultJwksCache
} satisfies Omit<IdentityProviderSettings, "issuer" | "audiences">

const isHttpUrl = (value: string): boolean => {
  try {
    const url = new URL(value)
    return (url.protocol === "https:" || url.protocol === "http:") && url.username === "" && url.password === ""
  } catch {
    return false
  }
}

const httpUrl = (name: string) =>
  Config.string(name).pipe(Config.validate({ message: `${name} must be an http(s) URL`, validation: isHttpUrl }))

const list = (name: string) =>
  Config.string(name).pipe(
    Config.map((raw) => raw.split(",").map((item) => item.trim()).filter((item) => item.length > 0)),
    Config.mapOrFail((items) =>
      Arr.isNonEmptyReadonlyArray(items)
        ? Either.right(items)
        : Either.left(ConfigError.InvalidData([], `${name} must list at least one value, comma-separated`))
    )
  )

const algorithmsConfig = list("AUTH_ALGORITHMS").pipe(
  Config.mapOrFail((names) => {
    const algorithms = names.filter(isAsymmetricAlgorithm)
    return algorithms.length === names.length && Arr.isNonEmptyReadonlyArray(algorithms)
      ? Either.right(algorithms)
      : Either.left(ConfigError.InvalidData([], `AUTH_ALGORITHMS must list only ${asymmetricAlgorithms.join(", ")}`))
  }),
  Config.withDefault(identityProviderDefaults.algorithms)
)

const claimName = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must name a claim`, validation: (value) => value.trim().length > 0 })
  )

const jwksCacheConfig: Config.Config<JwksCacheSettings> = Config.all({
  maxAge: positiveSecondsDuration("AUTH_JWKS_MAX_AGE_S", defaultJwksCache.maxAge),
  cooldown: positiveSecondsDuration("AUTH_JWKS_COOLDOWN_S", defaultJwksCache.cooldown),
  timeout: positiveMillisDuration("AUTH_JWKS_TIMEOUT_MS", defaultJwksCache.timeout)
}).pipe(
  Config.validate({
    message: "AUTH_JWKS_COOLDOWN_S must not be longer than AUTH_JWKS_MAX_AGE_S",
    validation: (jwks) => Duration.lessThanOrEqualTo(jwks.cooldown, jwks.maxAge)
  })
)

const identityProviderConfig = Config.all({
  issuer: Config.option(httpUrl("AUTH_ISSUER")),
  jwksUrl: Config.option(httpUrl("AUTH_JWKS_URL")),
  audiences: Config.option(list("AUTH_AUDIENCE")),
  audienceClaim: claimName("AUTH_AUDIENCE_CLAIM", identityProviderDefaults.audienceClaim),
  algorithms: algorithmsConfig,
  roleClaim: claimName("AUTH_ROLE_CLAIM", identityProviderDefaults.roleClaim),
  adminRole: claimName("AUTH_ADMIN_ROLE", identityProviderDefaults.adminRole),
  subjectClaim: claimName("AUTH_SUBJECT_CLAIM", identityProviderDefaults.subjectClaim),
  clockSkew: Config.integer("AUTH_CLOCK_SKEW_S").pipe(
    Config.withDefault(Duration.toSeconds(identityProviderDefaults.clockSkew)),
    Config.validate({ message: "AUTH_CLOCK_SKEW_S must be 0 to 300 seconds", validation: (n) => n >= 0 && n <= 300 }),
    Config.map(Duration.seconds)
  ),
  jwks: jwksCacheConfig
}).pipe(
  Config.mapOrFail(
    (
      { audiences, issuer, jwksUrl, ...rest }
    ): Either.Either<Option.Option<IdentityProviderSettings>, ConfigError.ConfigError> => {
      if (Option.isNone(issuer)) {
        return Option.isSome(jwksUrl) || Option.isSome(audiences)
          ? Either.left(
            ConfigError.MissingData(
              ["AUTH_ISSUER"],
              "AUTH_JWKS_URL and AUTH_AUDIENCE need AUTH_ISSUER: every provider token's iss is checked"
            )
          )
          : Either.right(Option.none())
      }
      if (Option.isNone(audiences)) {
        return Either.left(
          ConfigError.MissingData(
            ["AUTH_AUDIENCE"],
            "AUTH_AUDIENCE must be set with AUTH_ISSUER: the audience this API's tokens are issued for"
          )
        )
      }
      return Either.right(Option.some({ issuer: issuer.value, jwksUrl, audiences: audiences.value, ...rest }))
    }
  )
)

export class AuthSettings extends Context.Tag("ai-job-engine/config/AuthSettings")<AuthSettings, AuthSettingsShape>() {
  /** The settings as the environment gives them, possibly neither a secret nor an issuer (the embedded mode then makes a secret). */
  static readonly config: Config.Config<AuthSettingsShape> = Config.all({
    jwtSecret: Config.option(jwtSecretConfig),
    identityProvider: identityProviderConfig
  })

  /** From the environment, for an API on MySQL: `AUTH_JWT_SECRET` or `AUTH_ISSUER` must be set. */
  static readonly layer = Layer.effect(
    AuthSettings,
    Effect.flatMap(
      AuthSettings.config,
      (settings) =>
        Option.isNone(settings.jwtSecret) && Option.isNone(settings.identityProvider)
          ? Effect.fail(
            ConfigError.MissingData(
              ["AUTH_JWT_SECRET"],
              "AUTH_JWT_SECRET or AUTH_ISSUER must be set: the API verifies bearer tokens with the secret or the identity provider's keys"
            )
          )
          : Effect.succeed(settings)
    )
  )

  /** Explicit settings, for tests, benches and the embedded program. */
  static readonly make = (settings: {
    readonly jwtSecret?: string | undefined
    readonly identityProvider?:
      | (Partial<Omit<IdentityProviderSettings, "jwks">> & Pick<IdentityProviderSettings, "issuer" | "audiences"> & {
        readonly jwks?: Partial<JwksCacheSettings>
      })
      | undefined
  }) =>
    Layer.succeed(AuthSettings, {
      jwtSecret: Option.map(Option.fromNullable(settings.jwtSecret), Redacted.make),
      identityProvider: Option.map(Option.fromNullable(settings.identityProvider), (provider) => ({
        ...identityProviderDefaults,
        ...provider,
        jwks: { ...defaultJwksCache, ...provider.jwks }
      }))
    })
}
