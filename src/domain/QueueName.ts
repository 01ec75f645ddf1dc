import { Schema } from "effect"

/** docs/architecture.md §7.1: the two queues of the unified engine. */
export const QueueName = Schema.Literal("ai-interactive", "ai-background")
export type QueueName = typeof QueueName.Type

export const allQueueNames: ReadonlyArray<QueueName> = QueueName.literals
