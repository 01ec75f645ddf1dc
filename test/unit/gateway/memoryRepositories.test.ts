import { Layer } from "effect"
import { MemoryCredentialRepository } from "../../../src/layers/memory/MemoryCredentialRepository.js"
import { MemoryDatabaseLive } from "../../../src/layers/memory/MemoryDatabase.js"
import { MemoryUsageLogRepository } from "../../../src/layers/memory/MemoryUsageLogRepository.js"
import { credentialAndUsageContract } from "../../contract/CredentialAndUsage.contract.js"

credentialAndUsageContract(
  "memory usage log and credential repositories",
  Layer.mergeAll(MemoryUsageLogRepository, MemoryCredentialRepository).pipe(Layer.provide(MemoryDatabaseLive))
)
