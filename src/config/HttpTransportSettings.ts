import { Config, Duration } from "effect"
import { positiveMillisDuration } from "./configValues.js"

/**
 * How the HTTP server treats the transport itself: the largest request body it reads, how long
 * a client may take to send its headers and its whole request, and which browser origins may
 * call the API across origins (none unless listed).
 */
export interface HttpTransportSettings {
  /** `HTTP_MAX_BODY_BYTES`: a larger body is refused with 413 without being read past the limit. */
  readonly maxBodyBytes: number
  /** `HTTP_REQUEST_TIMEOUT_MS`: a request (headers and body) not received in this time is closed with 408. */
  readonly requestTimeout: Duration.Duration
  /** `HTTP_HEADERS_TIMEOUT_MS`: headers not received in this time are closed with 408. */
  readonly headersTimeout: Duration.Duration
  /** `CORS_ALLOWED_ORIGINS`: origins answered with CORS headers; empty turns CORS off. */
  readonly corsAllowedOrigins: ReadonlyArray<string>
}

export const defaultHttpTransport: HttpTransportSettings = {
  maxBodyBytes: 1_048_576,
  requestTimeout: Duration.seconds(30),
  headersTimeout: Duration.seconds(10),
  corsAllowedOrigins: []
}

const positiveInteger = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive whole number`, validation: (n) => n > 0 })
  )

/** `https://app.example.com` as the browser sends it in `Origin`: scheme, host and port, nothing else. */
const isOrigin = (value: string): boolean => {
  try {
    return new URL(value).origin === value
  } catch {
    return false
  }
}

const corsOrigins = Config.string("CORS_ALLOWED_ORIGINS").pipe(
  Config.withDefault(""),
  Config.map((raw) => raw.split(",").map((origin) => origin.trim()).filter((origin) => origin.length > 0)),
  Config.validate({
    message: "CORS_ALLOWED_ORIGINS must list origins like https://app.example.com, comma-separated (no paths, no *)",
    validation: (origins) => origins.every(isOrigin)
  })
)

export const httpTransportConfig: Config.Config<HttpTransportSettings> = Config.all({
  maxBodyBytes: positiveInteger("HTTP_MAX_BODY_BYTES", defaultHttpTransport.maxBodyBytes),
  requestTimeout: positiveMillisDuration("HTTP_REQUEST_TIMEOUT_MS", defaultHttpTransport.requestTimeout),
  headersTimeout: positiveMillisDuration("HTTP_HEADERS_TIMEOUT_MS", defaultHttpTransport.headersTimeout),
  corsAllowedOrigins: corsOrigins
}).pipe(
  Config.validate({
    message: "HTTP_HEADERS_TIMEOUT_MS must not be longer than HTTP_REQUEST_TIMEOUT_MS",
    validation: (settings) => Duration.lessThanOrEqualTo(settings.headersTimeout, settings.requestTimeout)
  })
)

/**
 * Node's own timers, from the settings. Node checks them every `connectionsCheckingInterval`
 * (30 s by default), so the check runs often enough for the shorter of the two to hold.
 */
export const nodeServerOptions = (settings: HttpTransportSettings) => {
  const headersTimeout = Duration.toMillis(settings.headersTimeout)
  return {
    requestTimeout: Duration.toMillis(settings.requestTimeout),
    headersTimeout,
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeout / 4)))
  }
}
