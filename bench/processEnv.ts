/**
 * The settings every multi-process bench gives its programs: no admission limit in the way of the
 * load, leases and the reaper on short timers (a killed process recovers within the run), JSON logs.
 */
export const processBenchEnv: Readonly<Record<string, string>> = {
  MAX_ACTIVE_JOBS_PER_USER: "1000000",
  DAILY_JOB_QUOTA: "1000000",
  JOB_LOCK_TTL_MS: "15000",
  JOB_HEARTBEAT_MS: "5000",
  REAPER_GRACE_MS: "5000",
  REAPER_INTERVAL_MS: "5000",
  OUTBOX_POLL_MS: "1000",
  LOG_FORMAT: "json"
}
