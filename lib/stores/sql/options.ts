/** The options every SQL store takes (PostgreSQL, MySQL/MariaDB). */
export interface SqlStoreOptions {
  /** The records' table, optionally qualified by its schema (database on MySQL). */
  table?: string;
  /** Create the schema, table and index when they are missing. */
  ensureSchema?: boolean;
  /** How often expired records are deleted, in milliseconds; `0` disables it. */
  sweepIntervalMs?: number;
  /** Most rows one sweeper statement deletes. */
  sweepBatchSize?: number;
}

const IDENTIFIER = '[A-Za-z_][A-Za-z0-9_]*';
const TABLE_NAME = new RegExp(`^(?:${IDENTIFIER}\\.)?${IDENTIFIER}$`);

/**
 * Why a SQL store's options are invalid (starting with the option's name), or undefined. `maxName`
 * is the longest table name, schema included, the database keeps whole (`why` says what else it
 * names, if anything).
 */
export function checkSqlStoreOptions(
  options: SqlStoreOptions,
  maxName: number,
  why = '',
): string | undefined {
  const { table, ensureSchema, sweepIntervalMs, sweepBatchSize } = options;
  if (table !== undefined && !(typeof table === 'string' && TABLE_NAME.test(table))) {
    const got = JSON.stringify(table) ?? typeof table;
    return `table must be a table name, optionally schema-qualified (letters, digits, _): ${got}`;
  }
  if (table !== undefined && table.length > maxName) {
    return `table must be at most ${maxName} characters with its schema${why}, got ${table.length}`;
  }
  if (ensureSchema !== undefined && typeof ensureSchema !== 'boolean') {
    return `ensureSchema must be a boolean, got ${typeof ensureSchema}`;
  }
  if (
    sweepIntervalMs !== undefined &&
    !(Number.isSafeInteger(sweepIntervalMs) && sweepIntervalMs >= 0 && sweepIntervalMs < 2 ** 31)
  ) {
    const got = String(sweepIntervalMs);
    return `sweepIntervalMs must be a whole number of ms from 0 to ${2 ** 31 - 1}, got ${got}`;
  }
  if (
    sweepBatchSize !== undefined &&
    !(Number.isSafeInteger(sweepBatchSize) && sweepBatchSize > 0)
  ) {
    return `sweepBatchSize must be a positive whole number, got ${String(sweepBatchSize)}`;
  }
  return undefined;
}

/** The schema part of a qualified table name, or undefined. */
export function schemaOf(table: string): string | undefined {
  const dot = table.indexOf('.');
  return dot < 0 ? undefined : table.slice(0, dot);
}
