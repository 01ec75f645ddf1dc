import { Schema } from "effect"

export const LifecycleStatus = Schema.Literal("queued", "running", "succeeded", "failed", "cancelled")
export type LifecycleStatus = typeof LifecycleStatus.Type

export const allLifecycleStatuses: ReadonlyArray<LifecycleStatus> = LifecycleStatus.literals

export const terminalStatuses: ReadonlyArray<LifecycleStatus> = ["succeeded", "failed", "cancelled"]

export const isTerminal = (status: LifecycleStatus): boolean => terminalStatuses.includes(status)

/**
 * The allowed transitions; everything else is illegal (docs/architecture.md §3.2). `running → running`
 * is the takeover of an expired lock: the same status under a new owner and a higher attempt count.
 */
export const allowedTransitions: Readonly<Record<LifecycleStatus, ReadonlyArray<LifecycleStatus>>> = {
  queued: ["running", "cancelled"],
  running: ["running", "succeeded", "failed", "cancelled"],
  succeeded: [],
  failed: [],
  cancelled: []
}

export const isAllowedTransition = (from: LifecycleStatus, to: LifecycleStatus): boolean =>
  allowedTransitions[from].includes(to)

/** The legacy `status` column is written beside `lifecycle_status` (shadow write) until the legacy readers are gone. */
export const LegacyStatus = Schema.Literal("pending", "processing", "completed", "failed", "cancelled")
export type LegacyStatus = typeof LegacyStatus.Type

export const legacyStatusOf: Readonly<Record<LifecycleStatus, LegacyStatus>> = {
  queued: "pending",
  running: "processing",
  succeeded: "completed",
  failed: "failed",
  cancelled: "cancelled"
}
