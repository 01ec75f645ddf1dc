import type mysql from "mysql2/promise"

/**
 * The floors' transaction: `work` on a connection whose autocommit is off (its first statement
 * opened the transaction, as in the engine), then COMMIT, or ROLLBACK when it throws. Plain async
 * code, so the worker floor's bundle holds no Effect.
 */
export const committed = async <A>(connection: mysql.PoolConnection, work: () => Promise<A>): Promise<A> => {
  try {
    const result = await work()
    await connection.query("COMMIT")
    return result
  } catch (error) {
    await connection.query("ROLLBACK")
    throw error
  }
}
