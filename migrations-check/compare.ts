import { Data } from "effect"
import type { DeclaredColumn, DeclaredTable } from "./DeclaredSchema.js"
import type { IntrospectedIndex, IntrospectedSchema, IntrospectedTable } from "./introspect.js"

/**
 * One way the database differs from the declared schema. Most are drift (the code would break);
 * the `Undeclared*` column and index cases are notes, because operators may add columns and
 * indexes ("add columns freely, rename none") without breaking anything the code relies on.
 */
export type SchemaDifference = Data.TaggedEnum<{
  MissingTable: { readonly table: string }
  UndeclaredTable: { readonly table: string }
  MissingColumn: { readonly table: string; readonly column: DeclaredColumn }
  UndeclaredColumn: { readonly table: string; readonly column: string; readonly reportedType: string }
  ColumnTypeMismatch: {
    readonly table: string
    readonly column: string
    readonly expected: string
    readonly actual: string
    readonly reportedType: string
  }
  ColumnNullabilityMismatch: {
    readonly table: string
    readonly column: string
    readonly expectedNullable: boolean
  }
  ColumnDefaultMismatch: {
    readonly table: string
    readonly column: string
    readonly expected: string
    readonly actual: string | undefined
  }
  PrimaryKeyMismatch: {
    readonly table: string
    readonly expected: ReadonlyArray<string>
    readonly actual: ReadonlyArray<string>
  }
  MissingUniqueKey: { readonly table: string; readonly columns: ReadonlyArray<string> }
  MissingIndex: { readonly table: string; readonly columns: ReadonlyArray<string> }
  UndeclaredUniqueKey: { readonly table: string; readonly name: string; readonly columns: ReadonlyArray<string> }
  UndeclaredIndex: { readonly table: string; readonly name: string; readonly columns: ReadonlyArray<string> }
}>

export const SchemaDifference = Data.taggedEnum<SchemaDifference>()

/** Whether a difference breaks the contract (fails the check) or is only worth reporting. */
export const isDrift: (difference: SchemaDifference) => boolean = SchemaDifference.$match({
  MissingTable: () => true,
  UndeclaredTable: () => true,
  MissingColumn: () => true,
  UndeclaredColumn: () => false,
  ColumnTypeMismatch: () => true,
  ColumnNullabilityMismatch: () => true,
  ColumnDefaultMismatch: () => true,
  PrimaryKeyMismatch: () => true,
  MissingUniqueKey: () => true,
  MissingIndex: () => true,
  // An extra unique key can reject writes the code expects to succeed, but an operator may
  // have added it on purpose: worth a note, not a failed deploy.
  UndeclaredUniqueKey: () => false,
  UndeclaredIndex: () => false
})

const sameColumns = (left: ReadonlyArray<string>, right: ReadonlyArray<string>) =>
  left.length === right.length && left.every((column, position) => column === right[position])

/**
 * Every difference between the declared schema and the introspected one, in a stable order:
 * table by table as declared, then the undeclared tables. Keys and indexes are matched by
 * column list (their names are not part of the contract).
 */
export const compareSchemas = (
  declared: ReadonlyArray<DeclaredTable>,
  actual: IntrospectedSchema
): ReadonlyArray<SchemaDifference> => {
  const actualByName = new Map(actual.tables.map((table) => [table.name, table]))
  const declaredNames = new Set(declared.map((table) => table.name))

  const declaredTableDifferences = declared.flatMap((declaredTable) => {
    const actualTable = actualByName.get(declaredTable.name)
    return actualTable === undefined
      ? [SchemaDifference.MissingTable({ table: declaredTable.name })]
      : compareTable(declaredTable, actualTable)
  })
  const undeclaredTables = actual.tables
    .filter((table) => !declaredNames.has(table.name))
    .map((table) => SchemaDifference.UndeclaredTable({ table: table.name }))

  return [...declaredTableDifferences, ...undeclaredTables]
}

const compareTable = (declared: DeclaredTable, actual: IntrospectedTable): ReadonlyArray<SchemaDifference> => {
  const table = declared.name
  const actualColumns = new Map(actual.columns.map((column) => [column.name, column]))
  const declaredColumnNames = new Set(declared.columns.map((column) => column.name))

  const columnDifferences = declared.columns.flatMap((column): ReadonlyArray<SchemaDifference> => {
    const actualColumn = actualColumns.get(column.name)
    if (actualColumn === undefined) return [SchemaDifference.MissingColumn({ table, column })]
    return [
      ...(actualColumn.type === column.type ? [] : [
        SchemaDifference.ColumnTypeMismatch({
          table,
          column: column.name,
          expected: column.type,
          actual: actualColumn.type,
          reportedType: actualColumn.reportedType
        })
      ]),
      ...(actualColumn.nullable === column.nullable ? [] : [
        SchemaDifference.ColumnNullabilityMismatch({ table, column: column.name, expectedNullable: column.nullable })
      ]),
      // Only a default the code relies on is part of the contract.
      ...(column.defaultValue === undefined || actualColumn.defaultValue === column.defaultValue ? [] : [
        SchemaDifference.ColumnDefaultMismatch({
          table,
          column: column.name,
          expected: column.defaultValue,
          actual: actualColumn.defaultValue
        })
      ])
    ]
  })
  const undeclaredColumns = actual.columns
    .filter((column) => !declaredColumnNames.has(column.name))
    .map((column) =>
      SchemaDifference.UndeclaredColumn({ table, column: column.name, reportedType: column.reportedType })
    )

  return [
    ...columnDifferences,
    ...undeclaredColumns,
    ...compareKeys(declared, actual.indexes)
  ]
}

const compareKeys = (
  declared: DeclaredTable,
  actualIndexes: ReadonlyArray<IntrospectedIndex>
): ReadonlyArray<SchemaDifference> => {
  const table = declared.name
  const primary = actualIndexes.find((index) => index.primary)
  const secondary = actualIndexes.filter((index) => !index.primary)

  const primaryKeyDifferences = primary !== undefined && sameColumns(primary.columns, declared.primaryKey)
    ? []
    : [SchemaDifference.PrimaryKeyMismatch({ table, expected: declared.primaryKey, actual: primary?.columns ?? [] })]

  // A unique key is only satisfied by a unique index; a declared index is served by any index
  // on exactly those columns, unique or not.
  const hasUniqueIndexOn = (columns: ReadonlyArray<string>) =>
    actualIndexes.some((index) => index.unique && sameColumns(index.columns, columns))
  const hasIndexOn = (columns: ReadonlyArray<string>) => secondary.some((index) => sameColumns(index.columns, columns))

  const missingUniqueKeys = declared.uniqueKeys
    .filter((columns) => !hasUniqueIndexOn(columns))
    .map((columns) => SchemaDifference.MissingUniqueKey({ table, columns }))
  const missingIndexes = declared.indexes
    .filter((columns) => !hasIndexOn(columns))
    .map((columns) => SchemaDifference.MissingIndex({ table, columns }))

  const undeclared = secondary.flatMap((index): ReadonlyArray<SchemaDifference> => {
    if (index.unique) {
      return declared.uniqueKeys.some((columns) => sameColumns(columns, index.columns))
        ? []
        : [SchemaDifference.UndeclaredUniqueKey({ table, name: index.name, columns: index.columns })]
    }
    return declared.indexes.some((columns) => sameColumns(columns, index.columns))
      ? []
      : [SchemaDifference.UndeclaredIndex({ table, name: index.name, columns: index.columns })]
  })

  return [...primaryKeyDifferences, ...missingUniqueKeys, ...missingIndexes, ...undeclared]
}
