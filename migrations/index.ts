import * as Migrator from "@effect/sql/Migrator"
import ai_job from "./0001_ai_job.js"
import ai_job_snapshot from "./0002_ai_job_snapshot.js"
import ai_job_artifact from "./0003_ai_job_artifact.js"
import outbox_event from "./0004_outbox_event.js"
import ai_usage_log from "./0005_ai_usage_log.js"
import user_model_credential from "./0006_user_model_credential.js"
import flashcard from "./0007_flashcard.js"
import learning_evaluation from "./0008_learning_evaluation.js"
import ai_user_job_gate from "./0009_ai_user_job_gate.js"
import synthetic_echo_result from "./0010_synthetic_echo_result.js"
import exact_identifiers from "./0011_exact_identifiers.js"
import usage_call_unique from "./0012_usage_call_unique.js"
import business_created_at_default from "./0013_business_created_at_default.js"
import learning_analysis from "./0014_learning_analysis.js"
import job_trace_parent from "./0015_job_trace_parent.js"
import job_retried_from from "./0016_job_retried_from.js"
import outbox_event_lane from "./0017_outbox_event_lane.js"
import usage_estimated from "./0018_usage_estimated.js"
import ai_job_batch from "./0019_ai_job_batch.js"

/** Every migration, by `{id}_{name}`; the Migrator runs those above the last one recorded. */
export const migrations = Migrator.fromRecord({
  "0001_ai_job": ai_job,
  "0002_ai_job_snapshot": ai_job_snapshot,
  "0003_ai_job_artifact": ai_job_artifact,
  "0004_outbox_event": outbox_event,
  "0005_ai_usage_log": ai_usage_log,
  "0006_user_model_credential": user_model_credential,
  "0007_flashcard": flashcard,
  "0008_learning_evaluation": learning_evaluation,
  "0009_ai_user_job_gate": ai_user_job_gate,
  "0010_synthetic_echo_result": synthetic_echo_result,
  "0011_exact_identifiers": exact_identifiers,
  "0012_usage_call_unique": usage_call_unique,
  "0013_business_created_at_default": business_created_at_default,
  "0014_learning_analysis": learning_analysis,
  "0015_job_trace_parent": job_trace_parent,
  "0016_job_retried_from": job_retried_from,
  "0017_outbox_event_lane": outbox_event_lane,
  "0018_usage_estimated": usage_estimated,
  "0019_ai_job_batch": ai_job_batch
})

export const migrationsTable = "effect_sql_migrations"
