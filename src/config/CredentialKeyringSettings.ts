import { Config, ConfigError, Context, Either, Layer, Option, Redacted } from "effect"

/** A 32-byte key from its base64 text; none when it is not 32 bytes. */
export const keyFromBase64 = (value: string): Option.Option<Buffer> => {
  const buffer = Buffer.from(value.trim(), "base64")
  return buffer.length === 32 ? Option.some(buffer) : Option.none()
}

/** Parses `version:base64key,version:base64key`; a malformed entry fails naming the variable only. */
const parsePreviousKeys = (
  value: Redacted.Redacted<string>
): Either.Either<ReadonlyArray<readonly [number, Buffer]>, string> => {
  const entries: Array<readonly [number, Buffer]> = []
  for (const part of Redacted.value(value).split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
    const separator = part.indexOf(":")
    const version = Number(part.slice(0, separator))
    const key = keyFromBase64(part.slice(separator + 1))
    if (separator <= 0 || !Number.isInteger(version) || version < 1 || Option.isNone(key)) {
      return Either.left(
        "CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS must be version:base64key pairs (32-byte keys), comma separated"
      )
    }
    entries.push([version, key.value])
  }
  return Either.right(entries)
}

/**
 * The versions of the stored keys' encryption: `CREDENTIAL_ENCRYPTION_KEY` (current, see
 * ProviderConfig) is version `CREDENTIAL_ENCRYPTION_KEY_VERSION` (default 1);
 * `CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS` (`2:base64,1:base64`, optional) still decrypt. No current
 * key: the keyring is empty, storing fails and stored keys cannot be read.
 */
export class CredentialKeyringSettings extends Context.Tag("ai-job-engine/CredentialKeyringSettings")<
  CredentialKeyringSettings,
  { readonly currentVersion: number; readonly previous: ReadonlyArray<readonly [number, Buffer]> }
>() {
  static readonly config = Config.all({
    currentVersion: Config.integer("CREDENTIAL_ENCRYPTION_KEY_VERSION").pipe(
      Config.withDefault(1),
      Config.validate({
        message: "CREDENTIAL_ENCRYPTION_KEY_VERSION must be a whole number ≥ 1",
        validation: (n) => n >= 1
      })
    ),
    previous: Config.option(Config.redacted("CREDENTIAL_ENCRYPTION_PREVIOUS_KEYS")).pipe(
      Config.mapOrFail((value) =>
        Option.match(value, {
          onNone: () => Either.right<ReadonlyArray<readonly [number, Buffer]>>([]),
          onSome: (v) => Either.mapLeft(parsePreviousKeys(v), (message) => ConfigError.InvalidData([], message))
        })
      )
    )
  })
  static readonly layer = Layer.effect(CredentialKeyringSettings, CredentialKeyringSettings.config)
}
