import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { AiJobLifecycleRepository } from "../../services/AiJobLifecycleRepository.js"
import { UnitOfWork } from "../../services/UnitOfWork.js"
import { makeLifecycleCreation } from "./lifecycle/create.js"
import { makeLifecycleLeases } from "./lifecycle/lease.js"
import { makeLifecycleLocks } from "./lifecycle/lock.js"
import { makeLifecycleQueries } from "./lifecycle/queries.js"
import { makeLifecycleRecovery } from "./lifecycle/recovery.js"
import { makeLifecycleShared } from "./lifecycle/shared.js"
import { makeLifecycleTerminals } from "./lifecycle/terminal.js"
import { makeMysqlOutboxRepository } from "./MysqlOutboxRepository.js"
import { MysqlUnitOfWork } from "./MysqlUnitOfWork.js"

/**
 * `ai_job` on MySQL. Every state change is one compare-and-set `UPDATE ... WHERE` on the
 * expected state, read back through `affectedRows` (MySQL has no `RETURNING`); when nothing
 * matched, the row is read and `LifecycleGuards` names the refusal. Lease times are the
 * server's `UTC_TIMESTAMP(3)`. Each part (in `lifecycle/`) builds its statements once, here.
 */
export const makeMysqlAiJobLifecycleRepository = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const unitOfWork = yield* UnitOfWork
  const outbox = yield* makeMysqlOutboxRepository
  const shared = makeLifecycleShared(sql)

  return AiJobLifecycleRepository.of({
    ...makeLifecycleCreation(shared),
    ...makeLifecycleQueries(shared),
    ...makeLifecycleLocks(shared, unitOfWork),
    ...makeLifecycleLeases(shared),
    ...makeLifecycleTerminals(shared, unitOfWork, outbox),
    ...makeLifecycleRecovery(shared)
  })
})

/** Over the `SqlClient` in context; its terminal writes open their transactions through `MysqlUnitOfWork`. */
export const MysqlAiJobLifecycleRepository = Layer.effect(AiJobLifecycleRepository, makeMysqlAiJobLifecycleRepository)
  .pipe(
    Layer.provide(MysqlUnitOfWork)
  )
