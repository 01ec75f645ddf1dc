import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Deferred, Duration, Effect, Exit, Layer, Option, Schema } from "effect"
import { QueueSettings } from "../../../src/config/QueueSettings.js"
import { QuotaLimitsConfig } from "../../../src/config/QuotaLimitsConfig.js"
import { InProcessCancelSignal } from "../../../src/layers/memory/InProcessCancelSignal.js"
import { InProcessJobEvents } from "../../../src/layers/memory/InProcessJobEvents.js"
import { InProcessOutboxSignal } from "../../../src/layers/memory/InProcessOutboxSignal.js"
import { MemoryJobQueueLive } from "../../../src/layers/memory/MemoryJobQueue.js"
import { MemoryWorkerDirectory } from "../../../src/layers/memory/MemoryWorkerDirectory.js"
import { MysqlRepositories } from "../../../src/main/AppLayers.js"
import { AiJobLifecycleRepository } from "../../../src/services/AiJobLifecycleRepository.js"
import { AiJobService } from "../../../src/services/AiJobService.js"
import { UnitOfWork } from "../../../src/services/UnitOfWork.js"
import { waitUntil } from "../../support/dispatcherStack.js"
import { memoryEngineStack, startEngine } from "../../support/engineStack.js"
import { scratchMysqlLayer } from "../../support/scratchDatabase.js"

/**
 * A frozen owner's open transaction holds the rows its PROJECT wrote. The
 * server ends that transaction once it has been idle longer than the bound, and the new owner's
 * PROJECT, whose lock waits time out meanwhile, retries within its lease and succeeds.
 */

/**
 * Short bounds so the test takes seconds: a lock wait of 1 s, an idle write transaction of 10 s
 * (longer than the engine's own one INTERNAL retry of PROJECT would cover).
 */
const bounds = ConfigProvider.fromMap(
  new Map([["DB_LOCK_WAIT_TIMEOUT_S", "1"], ["DB_IDLE_TRANSACTION_TIMEOUT_S", "10"]])
)

const mysqlInfrastructure = Layer.mergeAll(
  MysqlRepositories.pipe(Layer.provideMerge(scratchMysqlLayer("project_lock", { maxConnections: 10 }))),
  MemoryJobQueueLive,
  InProcessOutboxSignal,
  InProcessCancelSignal,
  MemoryWorkerDirectory,
  InProcessJobEvents
).pipe(
  Layer.provide(Layer.mergeAll(Layer.setConfigProvider(bounds), QuotaLimitsConfig.make({}), QueueSettings.make())),
  Layer.orDie
)

const EchoRows = Schema.Array(Schema.Struct({ echo: Schema.String }))

const frozenOwnerScenario = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const service = yield* AiJobService
    const unitOfWork = yield* UnitOfWork
    const { job } = yield* service.createJob({
      userId: "frozen-owner-user",
      jobType: "synthetic_echo",
      targetType: "t",
      targetId: "t",
      input: { message: "hello" }
    })

    // The frozen owner: an engine transaction that wrote the job's business row, then stopped.
    const holding = yield* Deferred.make<void>()
    const thaw = yield* Deferred.make<void>()
    const frozen = yield* Effect.fork(
      unitOfWork.transaction(
        Effect.gen(function*() {
          yield* sql`INSERT INTO synthetic_echo_result (id, job_id, echo, created_at)
                     VALUES (${"00000000-0000-0000-0000-000000000000"}, ${job.id}, ${"from the frozen owner"}, UTC_TIMESTAMP(3))`
          yield* Deferred.succeed(holding, undefined)
          yield* Deferred.await(thaw)
          yield* sql`SELECT 1`
        }).pipe(Effect.orDie)
      )
    )
    yield* Deferred.await(holding)

    yield* startEngine("new-owner")
    const jobs = yield* AiJobLifecycleRepository
    const done = yield* waitUntil(
      Effect.map(jobs.findById(job.id), Option.getOrThrow),
      (row) => row.lifecycleStatus === "succeeded" || row.lifecycleStatus === "failed",
      { timeout: Duration.seconds(40), every: Duration.millis(100) }
    )
    expect({ status: done.lifecycleStatus, errorCode: done.errorCode }).toEqual({
      status: "succeeded",
      errorCode: null
    })
    const rows = yield* Effect.flatMap(
      sql`SELECT echo FROM synthetic_echo_result WHERE job_id = ${job.id}`,
      Schema.decodeUnknown(EchoRows)
    )
    expect(rows).toHaveLength(1)
    expect(rows[0]?.echo).not.toBe("from the frozen owner")

    // The frozen owner wakes up to find its connection gone: the server killed it.
    yield* Deferred.succeed(thaw, undefined)
    const woke = yield* frozen.await
    expect(Exit.isFailure(woke)).toBe(true)
  }).pipe(Effect.scoped)

describe("PROJECT against a frozen owner's open transaction (MariaDB)", () => {
  it.live(
    "the server ends the idle transaction; the new owner's PROJECT retries its lock waits and succeeds",
    () =>
      Effect.gen(function*() {
        const infrastructure = yield* Layer.build(mysqlInfrastructure)
        const sql = Context.get(infrastructure, SqlClient.SqlClient)
        yield* frozenOwnerScenario(sql).pipe(
          Effect.provide(memoryEngineStack({ infrastructure: Layer.succeedContext(infrastructure) }))
        )
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )
})
