/**
 * Column types as information_schema reports them differ between servers for the same DDL.
 * Both MariaDB 10.11 and MySQL 8 must pass the check, so reported types are reduced to one form,
 * the form `DeclaredSchema` is written in.
 */

/** MariaDB (and MySQL 5.7) report `int(11)`; MySQL 8 reports `int`. The width changes nothing stored. */
const integerDisplayWidth = /^(tinyint|smallint|mediumint|int|bigint)\(\d+\)/

/** MariaDB stores a JSON column as `longtext` guarded by the column check `json_valid(`col`)`. */
const jsonValidCheck = /^json_valid\(`([^`]+)`\)$/i

/** The column a MariaDB `json_valid` check guards, if the clause is exactly such a check. */
export const jsonValidatedColumn = (checkClause: string): string | undefined =>
  jsonValidCheck.exec(checkClause.trim())?.[1]

/**
 * The normalized form of a reported `COLUMN_TYPE`: lower case, single spaces, no integer display
 * width, and `json` for MySQL's native JSON or MariaDB's `longtext` with a `json_valid` check.
 * A `longtext` without that check stays `longtext`: it would accept text the code cannot parse.
 */
export const normalizeColumnType = (reportedType: string, hasJsonValidCheck: boolean): string => {
  const lowered = reportedType.trim().toLowerCase().replace(/\s+/g, " ")
  if (lowered === "longtext" && hasJsonValidCheck) return "json"
  return lowered.replace(integerDisplayWidth, "$1")
}

/**
 * The normalized form of a reported `COLUMN_DEFAULT`. MariaDB reports "no default" on a nullable
 * column as the text `NULL` and quotes literals (`'pending'`); MySQL 8 reports SQL NULL and bare
 * literals. Both reduce to undefined or the lower-case unquoted value.
 */
export const normalizeColumnDefault = (reported: string | null): string | undefined => {
  if (reported === null || reported === "NULL") return undefined
  const trimmed = reported.trim()
  const unquoted = /^'(.*)'$/s.exec(trimmed)?.[1] ?? trimmed
  return unquoted.toLowerCase()
}
