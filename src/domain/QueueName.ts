import { Schema } from "effect"

export const QueueName = Schema.Literal("ai-interactive", "ai-background")
export type QueueName = typeof QueueName.Type

export const allQueueNames: ReadonlyArray<QueueName> = QueueName.literals
