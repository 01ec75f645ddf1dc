/**
 * The values of an `IN (…)` list padded to the next power of two by repeating the last one. A
 * statement then takes one of a few shapes instead of one per list length: mysql2 prepares each
 * shape once per connection, and MySQL caps prepared statements across all clients
 * (`max_prepared_stmt_count`). A repeated value changes no `IN` result and no affected-row count.
 */
export const paddedForIn = <A>(values: ReadonlyArray<A>): ReadonlyArray<A> => {
  const last = values[values.length - 1]
  if (last === undefined) return values
  let size = 1
  while (size < values.length) size *= 2
  return size === values.length ? values : [...values, ...Array.from({ length: size - values.length }, () => last)]
}
