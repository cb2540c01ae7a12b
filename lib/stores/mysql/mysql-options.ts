/**
 * The MySQL/MariaDB store's options and the module option `mysql`, with their checks (names and
 * values). Loads nothing: the module runs them before any store exists, and must not load mysql2.
 */
import type { Pool, PoolOptions } from 'mysql2';
import type { Pool as PromisePool } from 'mysql2/promise';
import { unknownOptionProblem } from '../../options/option-names';
import {
  checkSqlOption,
  checkSqlStoreOptions,
  SQL_CONNECTION_NAMES,
  SQL_STORE_OPTION_NAMES,
} from '../sql/options';

/** Options of `MysqlIdempotencyStore`. */
export interface MysqlIdempotencyStoreOptions {
  /**
   * The records' table, optionally qualified by its database (`'billing.idempotency_records'`):
   * letters, digits and `_`, at most 64 characters in all. Default: `'idempotency_records'` (see
   * `sql/mysql/` in the package).
   */
  table?: string;
  /**
   * Create the table (and, for a qualified name, its database) when missing, with the statements
   * of `sql/mysql/001_idempotency_records.sql`: at boot, or on first use when the database was
   * down then. Default: false: apply the SQL file with your migrations.
   */
  ensureSchema?: boolean;
  /**
   * How often expired records are deleted, in milliseconds; `0` disables it (then delete them
   * yourself). Default: 60 000.
   */
  sweepIntervalMs?: number;
  /**
   * Most rows one sweeper statement deletes; a sweep repeats it until a batch comes back short,
   * each batch its own short statement. Default: 500.
   */
  sweepBatchSize?: number;
  /**
   * Longest pause, in milliseconds, between two checks of the records that waiting duplicates
   * (`onConflict: 'wait'`) wait on, when their holder runs in another process. The first check
   * comes 25 ms after a wait starts, and the pause doubles up to this. Default: 1 000.
   */
  waitPollMaxMs?: number;
  /**
   * Whether `MysqlIdempotencyStore.close()` ends the pool. Default false: a pool you pass in
   * stays yours. The module sets it only for pools it created itself.
   */
  ownsPool?: boolean;
}

/**
 * The module option `mysql` in its object form: where to connect, and the store's options. Give
 * `connectionString` or `pool`, or `poolConfig` alone.
 */
export interface IdempotencyMysqlConfig extends Omit<MysqlIdempotencyStoreOptions, 'ownsPool'> {
  /**
   * `mysql://` URL of a pool the module creates, and ends on application shutdown (the option
   * `postgres` takes the same name).
   */
  connectionString?: string;
  /**
   * The old name of `connectionString`, still accepted: boot logs a deprecation warning once.
   * Not together with `connectionString`.
   * @deprecated use `connectionString`.
   */
  uri?: string;
  /** Your mysql2 pool (`createPool()`, callback or promise API), never ended by the module. */
  pool?: Pool | PromisePool;
  /**
   * More settings of the pool the module creates (`connectionLimit`, `ssl`...), over its
   * defaults: `connectTimeout` = the module's `storeTimeout`, `enableKeepAlive: true`.
   */
  poolConfig?: PoolOptions;
}

/** MySQL's longest identifier (64) for the table, plus its database and the dot. */
const MAX_NAME = 129;

/** Every name the store's options take: the compiler keeps the list whole. */
export const STORE_OPTIONS = Object.keys({
  ...SQL_STORE_OPTION_NAMES,
  waitPollMaxMs: true,
  ownsPool: true,
} satisfies Record<keyof MysqlIdempotencyStoreOptions, true>);

/** Every name the module option `mysql` takes in its object form. */
export const CONFIG = Object.keys({
  ...SQL_STORE_OPTION_NAMES,
  ...SQL_CONNECTION_NAMES,
  uri: true,
  waitPollMaxMs: true,
} satisfies Record<keyof IdempotencyMysqlConfig, true>);

/**
 * Why the store's constructor options are invalid (an unknown name, or a value starting with the
 * option's name), or undefined when they are valid.
 */
export function checkMysqlStoreOptions(options: MysqlIdempotencyStoreOptions): string | undefined {
  return unknownOptionProblem(options, STORE_OPTIONS) ?? checkValues(options);
}

function checkValues(options: MysqlIdempotencyStoreOptions): string | undefined {
  const problem = checkSqlStoreOptions(options, MAX_NAME);
  if (problem) return problem;
  const parts = options.table?.split('.') ?? [];
  if (parts.some((part) => part.length > 64)) {
    return `table: each part of the name must be at most 64 characters, got ${options.table}`;
  }
  const poll = options.waitPollMaxMs;
  if (poll !== undefined && !(Number.isSafeInteger(poll) && poll >= 25 && poll < 2 ** 31)) {
    return `waitPollMaxMs must be a whole number of ms from 25 to ${2 ** 31 - 1}, got ${poll}`;
  }
  return undefined;
}

/** Whether `value` is a mysql2 pool, callback or promise API (a connection has no getConnection). */
export function isMysqlPool(value: unknown): value is Pool | PromisePool {
  const pool = value as Partial<Record<'query' | 'getConnection' | 'end', unknown>> | null;
  return (
    typeof pool?.query === 'function' &&
    typeof pool.getConnection === 'function' &&
    typeof pool.end === 'function'
  );
}

/**
 * Why the `mysql` module option is invalid (a message naming it), or undefined when it is valid:
 * a connection string, a mysql2 pool, or a config with at most one of connectionString (or its old
 * name uri) and pool, and valid store options.
 */
export function checkMysqlOption(value: unknown): string | undefined {
  return checkSqlOption(value, {
    option: 'mysql',
    pool: 'a mysql2 pool',
    settings: 'mysql2 pool settings',
    names: CONFIG,
    isPool: isMysqlPool,
    checkValues,
    needsSource: true,
    own: (config) =>
      config.connectionString !== undefined && config.uri !== undefined
        ? 'mysql takes connectionString or uri (its old name), not both: keep connectionString'
        : undefined,
    url: (config) =>
      config.uri !== undefined
        ? ['uri', config.uri]
        : ['connectionString', config.connectionString],
  });
}
