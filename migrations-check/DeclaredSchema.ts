/**
 * The MySQL schema the code declares it needs: every table, column, key and index the
 * repositories, projectors and operators rely on.
 *
 * This is a second, hand-written statement of the contract the migrations build. It is not
 * generated from `migrations/` on purpose: `migrations-check` compares the two, so a migration
 * that drops, renames or retypes something the code depends on is caught before it ships, and
 * `migrations-check --live` catches a deployed database that drifted from it.
 *
 * Types are written in the normalized form `migrations-check` compares (lower case, no integer
 * display width, JSON as `json` whatever the server reports). Table and column names are a
 * public contract: add columns freely, rename none.
 */

/** A column type in normalized form. */
export type DeclaredColumnType =
  | "int"
  | "bigint"
  | "text"
  | "json"
  | "datetime(3)"
  | `char(${number})`
  | `varchar(${number})`
  | `varbinary(${number})`

export interface DeclaredColumn<Name extends string = string> {
  readonly name: Name
  readonly type: DeclaredColumnType
  readonly nullable: boolean
  /**
   * The column default the code relies on, normalized (lower case, no quotes), e.g.
   * `current_timestamp(3)`; left out where the code always writes the column itself.
   */
  readonly defaultValue?: string
}

export interface DeclaredTable<Name extends string = string, ColumnName extends string = string> {
  readonly name: Name
  readonly columns: ReadonlyArray<DeclaredColumn<ColumnName>>
  readonly primaryKey: ReadonlyArray<ColumnName>
  /** Unique keys by column list, in key order; the key's name is not part of the contract. */
  readonly uniqueKeys: ReadonlyArray<ReadonlyArray<ColumnName>>
  /** Non-unique indexes the hot queries need, by column list in index order. */
  readonly indexes: ReadonlyArray<ReadonlyArray<ColumnName>>
}

/** Column type constructors, so a width cannot be mistyped as a different type. */
export const ColumnType = {
  int: "int",
  bigint: "bigint",
  text: "text",
  json: "json",
  datetime3: "datetime(3)",
  char: (length: number): DeclaredColumnType => `char(${length})`,
  varchar: (length: number): DeclaredColumnType => `varchar(${length})`,
  varbinary: (length: number): DeclaredColumnType => `varbinary(${length})`
} as const

const required = <const Name extends string>(name: Name, type: DeclaredColumnType): DeclaredColumn<Name> => ({
  name,
  type,
  nullable: false
})

const nullable = <const Name extends string>(name: Name, type: DeclaredColumnType): DeclaredColumn<Name> => ({
  name,
  type,
  nullable: true
})

/** Keys and indexes may only name columns of their own table: a typo does not compile. */
const table = <const Name extends string, const Columns extends ReadonlyArray<DeclaredColumn>>(
  name: Name,
  columns: Columns,
  keys: {
    readonly primaryKey: ReadonlyArray<Columns[number]["name"]>
    readonly uniqueKeys?: ReadonlyArray<ReadonlyArray<Columns[number]["name"]>>
    readonly indexes?: ReadonlyArray<ReadonlyArray<Columns[number]["name"]>>
  }
): DeclaredTable<Name, Columns[number]["name"]> => ({
  name,
  columns,
  primaryKey: keys.primaryKey,
  uniqueKeys: keys.uniqueKeys ?? [],
  indexes: keys.indexes ?? []
})

const { int, bigint, text, json, datetime3, char, varchar, varbinary } = ColumnType

// Identifiers are VARBINARY so that they compare byte for byte (no trailing-space padding):
// engine-generated UUIDs in 36 bytes, anything a client may have chosen in 4 bytes per character.
const uuid = varbinary(36)
const userId = varbinary(256)

/**
 * A business row's `created_at`: the insert stamps the database clock, and the default keeps a
 * writer that forgets it from storing a zero date.
 */
const stampedCreatedAt: DeclaredColumn<"created_at"> = {
  ...required("created_at", datetime3),
  defaultValue: "current_timestamp(3)"
}

export const aiJobTable = table(
  "ai_job",
  [
    required("id", uuid),
    required("user_id", userId),
    required("job_type", varchar(64)),
    required("target_type", varchar(64)),
    required("target_id", varbinary(764)),
    nullable("idempotency_key", varbinary(764)),
    nullable("request_hash", char(64)),
    required("status", varchar(32)),
    required("lifecycle_status", varchar(16)),
    required("queue_name", varchar(32)),
    required("priority", int),
    required("progress", int),
    required("input", json),
    required("credential_mode", varchar(32)),
    nullable("credential_id", uuid),
    required("prompt_version", varchar(32)),
    required("input_schema_version", varchar(32)),
    required("output_schema_version", varchar(32)),
    required("attempt_count", int),
    required("max_attempts", int),
    required("lease_no", int),
    nullable("locked_by", varbinary(512)),
    nullable("locked_at", datetime3),
    nullable("lock_until", datetime3),
    nullable("cancel_requested_at", datetime3),
    nullable("started_at", datetime3),
    nullable("finished_at", datetime3),
    nullable("error_code", varchar(64)),
    nullable("public_error_message", varchar(512)),
    nullable("internal_error_message", text),
    nullable("output_hash", char(64)),
    nullable("trace_parent", varchar(55)),
    nullable("retried_from_job_id", uuid),
    required("created_at", datetime3),
    required("updated_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    uniqueKeys: [["user_id", "job_type", "idempotency_key"]],
    indexes: [
      ["user_id", "created_at", "id"],
      ["user_id", "lifecycle_status"],
      ["lifecycle_status", "lock_until"],
      ["created_at", "id"],
      ["job_type", "created_at"],
      ["lifecycle_status", "created_at"],
      ["queue_name", "created_at"],
      ["retried_from_job_id"]
    ]
  }
)

export const aiJobSnapshotTable = table(
  "ai_job_snapshot",
  [
    required("id", uuid),
    required("job_id", uuid),
    required("content", json),
    required("redaction_version", varchar(32)),
    required("expires_at", datetime3),
    required("created_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    uniqueKeys: [["job_id"]],
    indexes: [["expires_at"]]
  }
)

export const aiJobArtifactTable = table(
  "ai_job_artifact",
  [
    required("id", uuid),
    required("job_id", uuid),
    required("artifact_type", varchar(64)),
    required("artifact_id", varbinary(764)),
    required("ordinal", int),
    required("created_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    uniqueKeys: [["job_id", "artifact_type", "artifact_id"]]
  }
)

export const outboxEventTable = table(
  "outbox_event",
  [
    required("id", uuid),
    required("event_type", varchar(64)),
    required("lane", varchar(16)),
    required("aggregate_type", varchar(64)),
    required("aggregate_id", varbinary(256)),
    required("dedupe_key", varbinary(1020)),
    required("payload", json),
    required("status", varchar(16)),
    required("attempt_count", int),
    required("available_at", datetime3),
    nullable("locked_by", varbinary(512)),
    nullable("locked_at", datetime3),
    nullable("published_at", datetime3),
    nullable("last_error", text),
    nullable("delivered_to", json),
    required("created_at", datetime3),
    required("updated_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    uniqueKeys: [["dedupe_key"]],
    indexes: [
      ["status", "available_at"],
      ["lane", "status", "available_at"],
      ["status", "locked_at"],
      ["aggregate_type", "aggregate_id"]
    ]
  }
)

export const aiUsageLogTable = table(
  "ai_usage_log",
  [
    required("id", uuid),
    required("job_id", uuid),
    required("lease_no", int),
    required("attempt_no", int),
    required("credential_mode", varchar(32)),
    required("provider", varchar(64)),
    required("model", varchar(128)),
    required("prompt_tokens", int),
    required("completion_tokens", int),
    required("total_tokens", int),
    required("cost_micros", bigint),
    required("latency_ms", int),
    nullable("error_code", varchar(64)),
    nullable("usage_estimated", int),
    required("created_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    uniqueKeys: [["job_id", "lease_no", "attempt_no"]],
    indexes: [
      ["job_id", "attempt_no"],
      ["created_at"]
    ]
  }
)

export const userModelCredentialTable = table(
  "user_model_credential",
  [
    required("id", uuid),
    required("user_id", userId),
    required("provider", varchar(32)),
    required("encrypted_key", text),
    required("iv", varchar(32)),
    required("auth_tag", varchar(32)),
    required("key_version", int),
    required("key_fingerprint", char(64)),
    nullable("revoked_at", datetime3),
    required("created_at", datetime3),
    required("updated_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    indexes: [["user_id", "provider", "revoked_at"]]
  }
)

export const flashcardTable = table(
  "flashcard",
  [
    required("id", uuid),
    required("job_id", uuid),
    required("user_id", userId),
    nullable("deck_id", varbinary(256)),
    required("ordinal", int),
    required("front", text),
    required("back", text),
    stampedCreatedAt
  ],
  {
    primaryKey: ["id"],
    // One card per (job, ordinal): a projection that runs twice inserts nothing new.
    uniqueKeys: [["job_id", "ordinal"]],
    indexes: [["user_id", "deck_id"]]
  }
)

export const learningEvaluationTable = table(
  "learning_evaluation",
  [
    required("id", uuid),
    required("job_id", uuid),
    required("user_id", userId),
    required("concept", varchar(255)),
    required("score", int),
    required("feedback", text),
    required("gaps", json),
    stampedCreatedAt
  ],
  {
    primaryKey: ["id"],
    // One evaluation per job: the projector's idempotency rests on this key.
    uniqueKeys: [["job_id"]],
    indexes: [["user_id", "created_at"]]
  }
)

export const aiUserJobGateTable = table(
  "ai_user_job_gate",
  [required("user_id", userId), required("updated_at", datetime3)],
  {
    primaryKey: ["user_id"],
    uniqueKeys: [],
    indexes: []
  }
)

export const aiJobBatchTable = table(
  "ai_job_batch",
  [
    required("id", uuid),
    required("user_id", userId),
    required("job_type", varchar(64)),
    required("idempotency_key", varbinary(764)),
    required("request_hash", char(64)),
    required("job_ids", json),
    required("created_at", datetime3)
  ],
  {
    primaryKey: ["id"],
    // A batch's Idempotency-Key names one batch per user and job type, as on ai_job.
    uniqueKeys: [["user_id", "job_type", "idempotency_key"]],
    indexes: []
  }
)

export const syntheticEchoResultTable = table(
  "synthetic_echo_result",
  [required("id", uuid), required("job_id", uuid), required("echo", text), stampedCreatedAt],
  {
    primaryKey: ["id"],
    // One result per job: the echo projector's idempotency rests on this key.
    uniqueKeys: [["job_id"]],
    indexes: []
  }
)

export const learningAnalysisTable = table(
  "learning_analysis",
  [
    required("id", uuid),
    required("job_id", uuid),
    required("user_id", userId),
    required("evaluation_ids", json),
    required("summary", text),
    required("strengths", json),
    required("gaps", json),
    required("next_steps", json),
    stampedCreatedAt
  ],
  {
    primaryKey: ["id"],
    // One analysis per job: the projector's idempotency rests on this key.
    uniqueKeys: [["job_id"]],
    indexes: [["user_id", "created_at"]]
  }
)

/** Every table the code needs, in migration order. */
export const declaredSchema: ReadonlyArray<DeclaredTable> = [
  aiJobTable,
  aiJobSnapshotTable,
  aiJobArtifactTable,
  outboxEventTable,
  aiUsageLogTable,
  userModelCredentialTable,
  flashcardTable,
  learningEvaluationTable,
  aiUserJobGateTable,
  aiJobBatchTable,
  syntheticEchoResultTable,
  learningAnalysisTable
]
