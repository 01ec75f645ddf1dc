import { Effect, Layer } from "effect"
import { MysqlArtifactRepository } from "../../src/layers/mysql/MysqlArtifactRepository.js"
import { MysqlJobStatistics } from "../../src/layers/mysql/MysqlJobStatistics.js"
import { MysqlProjectionStore } from "../../src/layers/mysql/MysqlProjectionStore.js"
import { MysqlUsageLogRepository } from "../../src/layers/mysql/MysqlUsageLogRepository.js"
import { lifecycleRepositoryContract } from "../contract/AiJobLifecycleRepository.contract.js"
import { groupCommitContract } from "../contract/GroupCommit.contract.js"
import { jobStatisticsContract } from "../contract/JobStatistics.contract.js"
import { outboxClaimsContract } from "../contract/OutboxRepository.claims.contract.js"
import { outboxRepositoryContract } from "../contract/OutboxRepository.contract.js"
import { projectionStoreContract } from "../contract/ProjectionStore.contract.js"
import { quotasContract } from "../contract/Quotas.contract.js"
import { terminalEventsContract } from "../contract/TerminalEvents.contract.js"
import { jobCreation, mysqlRepositories } from "../support/foundationStack.js"

/** Against MariaDB the database's clock rules leases, so time has to pass for real. */
const realSleep = (millis: number) => Effect.sleep(millis)

lifecycleRepositoryContract({
  name: "mysql",
  layer: jobCreation(mysqlRepositories("lifecycle")).pipe(Layer.orDie),
  advance: realSleep,
  liveClock: true,
  lockTtlMs: 300
})

outboxRepositoryContract({
  name: "mysql",
  layer: jobCreation(mysqlRepositories("outbox")).pipe(Layer.orDie),
  advance: realSleep,
  liveClock: true,
  lockTtlMs: 300
})

terminalEventsContract({
  name: "mysql",
  layer: jobCreation(
    Layer.fresh(MysqlArtifactRepository).pipe(Layer.provideMerge(mysqlRepositories("terminal_events")))
  ).pipe(Layer.orDie),
  advance: realSleep,
  liveClock: true,
  lockTtlMs: 300
})

groupCommitContract({
  name: "mysql",
  layer: jobCreation(Layer.fresh(MysqlArtifactRepository).pipe(Layer.provideMerge(mysqlRepositories("group_commit"))))
    .pipe(Layer.orDie),
  advance: realSleep,
  liveClock: true,
  lockTtlMs: 300
})

outboxClaimsContract({
  name: "mysql",
  layer: jobCreation(mysqlRepositories("outbox_claims")).pipe(Layer.orDie),
  advance: realSleep,
  liveClock: true,
  lockTtlMs: 300
})

quotasContract(
  "mysql",
  jobCreation(mysqlRepositories("quotas", { maxActiveJobsPerUser: 5, dailyJobQuota: 8 })).pipe(Layer.orDie),
  { liveClock: true }
)

projectionStoreContract({
  name: "mysql",
  layer: jobCreation(Layer.fresh(MysqlProjectionStore).pipe(Layer.provideMerge(mysqlRepositories("projection")))).pipe(
    Layer.orDie
  ),
  liveClock: true
})

jobStatisticsContract({
  name: "mysql",
  layer: jobCreation(
    Layer.merge(MysqlJobStatistics, MysqlUsageLogRepository).pipe(Layer.provideMerge(mysqlRepositories("statistics")))
  ).pipe(
    Layer.orDie
  ),
  liveClock: true
})
