import { Schema } from "effect"

/** Whose key pays for a provider call. */
export const CredentialMode = Schema.Literal("platform_key", "user_deepseek_key")
export type CredentialMode = typeof CredentialMode.Type

/** The provider a user's own key (`user_deepseek_key`) is stored for and presented to, and no other. */
export const userKeyProvider = "deepseek"
