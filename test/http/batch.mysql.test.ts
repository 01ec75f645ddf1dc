import { batchCreationCases, batchSuiteLimits } from "./support/batchCases.js"
import { apiLayer } from "./support/harness.js"
import { mysqlEngine } from "./support/mysqlEngine.js"

// One transaction of multi-row inserts, the batch's key in ai_job_batch, the user's gate row
// serializing admission: the same cases as in memory, on MySQL + Redis.
batchCreationCases("MySQL + Redis", apiLayer(mysqlEngine("http_batch", batchSuiteLimits)))
