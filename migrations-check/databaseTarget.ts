import { Redacted } from "effect"
import { parseDatabaseUrl } from "../src/layers/mysql/MysqlDatabase.js"

/** Where no DATABASE_URL is set, the check builds its scratch database on the local test server. */
export const defaultServerUrl = Redacted.make("mysql://root@127.0.0.1:3306/test")

/** `user@host:port/database`: enough to tell which database was checked, and never the password. */
export const describeDatabaseUrl = (url: Redacted.Redacted<string>): string => {
  const parts = parseDatabaseUrl(url)
  return `${parts.username}@${parts.host}:${parts.port}/${parts.database}`
}

/** The same server and credentials as `url`, with `database` in the path instead. */
export const withDatabase = (url: Redacted.Redacted<string>, database: string): Redacted.Redacted<string> => {
  const parsed = new URL(Redacted.value(url))
  parsed.pathname = `/${encodeURIComponent(database)}`
  return Redacted.make(parsed.toString())
}
