import { unknownOptionProblem } from '../../options/option-names';
import { ownOptions } from '../../options/own-options';

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

/** The names every SQL store's options take (each store's list adds its own). */
export const SQL_STORE_OPTION_NAMES = {
  table: true,
  ensureSchema: true,
  sweepIntervalMs: true,
  sweepBatchSize: true,
} as const satisfies Record<keyof SqlStoreOptions, true>;

/** The names every SQL store's module option takes in its object form, besides its options. */
export const SQL_CONNECTION_NAMES = {
  connectionString: true,
  pool: true,
  poolConfig: true,
} as const;

/** The parts of a SQL store's module option in its object form that say where to connect. */
interface SqlConnection extends SqlStoreOptions {
  connectionString?: unknown;
  pool?: unknown;
  poolConfig?: unknown;
}

/** How {@link checkSqlOption} checks a SQL store's module option (`postgres`, `mysql`). */
export interface SqlOptionRules {
  /** The option's name. */
  option: string;
  /** What its pool is, in messages: `'a pg.Pool'`. */
  pool: string;
  /** What its `poolConfig` holds, in messages: `'pg.Pool settings'`. */
  settings: string;
  /** Every name its object form takes. */
  names: readonly string[];
  isPool(value: unknown): boolean;
  /** Why the store's options in it are invalid. */
  checkValues(options: SqlStoreOptions): string | undefined;
  /** A problem of this option's own, checked after the names (MySQL's old name `uri`). */
  own?(config: Record<string, unknown>): string | undefined;
  /** The connection string's name and value; default `connectionString`. */
  url?(config: Record<string, unknown>): [string, unknown];
  /** Whether its object form must say where to connect (connectionString, pool or poolConfig). */
  needsSource?: boolean;
}

/**
 * Why a SQL store's module option is invalid (a message naming it), or undefined when it is
 * valid: a connection string, a pool, or a config with at most one of its connection string and
 * pool, and valid store options.
 */
export function checkSqlOption(value: unknown, rules: SqlOptionRules): string | undefined {
  const { option } = rules;
  const shape = `${option} must be a connection string, ${rules.pool} or { connectionString | pool, ... }`;
  if (typeof value === 'string') return value.trim() === '' ? shape : undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return shape;
  if (rules.isPool(value)) return undefined;
  const names = unknownOptionProblem(value, rules.names);
  if (names) return `${option}: ${names}`;
  const config = value as SqlConnection & Record<string, unknown>;
  const own = rules.own?.(config);
  if (own) return own;
  const [name, url] = rules.url?.(config) ?? ['connectionString', config.connectionString];
  if (url !== undefined && config.pool !== undefined) {
    return `${option} takes ${name} or pool, not both`;
  }
  const source = url ?? config.pool ?? config.poolConfig;
  if (rules.needsSource && source === undefined) {
    return `${option} needs connectionString, pool or poolConfig`;
  }
  if (url !== undefined && (typeof url !== 'string' || url.trim() === '')) {
    return `${option}.${name} must be a non-empty string`;
  }
  if (config.pool !== undefined && !rules.isPool(config.pool)) {
    return `${option}.pool must be ${rules.pool}`;
  }
  if (
    config.poolConfig !== undefined &&
    (typeof config.poolConfig !== 'object' || !config.poolConfig)
  ) {
    return `${option}.poolConfig must be ${rules.settings} (an object)`;
  }
  const problem = rules.checkValues(config);
  return problem && `${option}.${problem}`;
}

/**
 * `options` with every name of `names` an own property, undefined when not set: what a SQL store
 * reads of its options (and of its module option) never reaches `Object.prototype`, where a
 * vulnerable deep merge elsewhere in the app may have left a `table`, a `pool` or an `ownsPool`
 * that every object answers to (see `ownOptions`).
 */
export function ownSqlOptions<T extends object>(options: T, names: readonly string[]): T {
  return ownOptions(options, { known: names, elsewhere: {} });
}
