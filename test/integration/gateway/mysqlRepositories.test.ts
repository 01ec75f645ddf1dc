import { Layer } from "effect"
import { MysqlCredentialRepository } from "../../../src/layers/mysql/MysqlCredentialRepository.js"
import { MysqlUsageLogRepository } from "../../../src/layers/mysql/MysqlUsageLogRepository.js"
import { credentialAndUsageContract } from "../../contract/CredentialAndUsage.contract.js"
import { scratchMysqlLayer } from "../../support/scratchDatabase.js"

credentialAndUsageContract(
  "MySQL usage log and credential repositories",
  Layer.mergeAll(MysqlUsageLogRepository, MysqlCredentialRepository).pipe(
    Layer.provide(scratchMysqlLayer("gateway_repos"))
  )
)
