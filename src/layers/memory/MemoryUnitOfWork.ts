import { Effect, Layer } from "effect"
import { UnitOfWork } from "../../services/UnitOfWork.js"
import { MemoryDatabase } from "./MemoryDatabase.js"

export const MemoryUnitOfWork = Layer.effect(
  UnitOfWork,
  Effect.map(MemoryDatabase, (db) => UnitOfWork.of({ transaction: db.transaction }))
)
