/**
 * Checks of the PostgreSQL store's options and of the module option `postgres`, names and values.
 * Loads nothing: the module runs them before any store exists.
 */
import type { Pool, PoolConfig } from 'pg';
import { unknownOptionProblem } from '../../options/option-names';
import {
  checkSqlOption,
  checkSqlStoreOptions,
  SQL_CONNECTION_NAMES,
  SQL_STORE_OPTION_NAMES,
} from '../sql/options';

/** Options of `PostgresIdempotencyStore`. */
export interface PostgresIdempotencyStoreOptions {
  /**
   * The records' table, optionally schema-qualified (`'billing.idempotency_records'`): letters,
   * digits and `_`, at most 63 characters in all (it also names the NOTIFY channel). It is quoted
   * as given, so case counts. Default: `'idempotency_records'` (see `sql/postgres/` in the package).
   */
  table?: string;
  /**
   * Create the table and its index when they are missing (`CREATE ... IF NOT EXISTS`, the
   * statements of `sql/postgres/001_idempotency_records.sql` for this table): at boot, or on first use
   * when the database was down then. Default: false: apply the SQL file with your migrations.
   */
  ensureSchema?: boolean;
  /**
   * How often expired records are deleted, in milliseconds; `0` disables it (then delete them
   * yourself). Default: 60 000.
   */
  sweepIntervalMs?: number;
  /**
   * Most rows one sweeper statement deletes; a sweep repeats it until a batch comes back short,
   * each batch its own short transaction. Default: 500.
   */
  sweepBatchSize?: number;
  /**
   * Whether `PostgresIdempotencyStore.close()` ends the pool. Default false: a pool you pass
   * in stays yours. The module sets it only for pools it created itself.
   */
  ownsPool?: boolean;
}

/**
 * The module option `postgres` in its object form: where to connect, and the store's options.
 * Give `connectionString` or `pool`, or neither (the pool then reads `poolConfig` and the PG*
 * environment variables, as node-postgres does).
 */
export interface IdempotencyPostgresConfig extends Omit<
  PostgresIdempotencyStoreOptions,
  'ownsPool'
> {
  /** `postgres://` URL of a pool the module creates, and ends on application shutdown. */
  connectionString?: string;
  /** Your `pg.Pool`, instead of `connectionString`: never ended by the module. */
  pool?: Pool;
  /**
   * More settings of the pool the module creates (`max`, `ssl`, `statement_timeout`...), over its
   * defaults: `connectionTimeoutMillis` = the module's `storeTimeout`, `keepAlive: true`,
   * `application_name: 'nestjs-idempotency'`.
   */
  poolConfig?: PoolConfig;
}

/** PostgreSQL's NAMEDATALEN - 1: the longest identifier, and channel name, it keeps whole. */
const MAX_NAME = 63;

/** Every name the store's options take: the compiler keeps the list whole. */
export const STORE_OPTIONS = Object.keys({
  ...SQL_STORE_OPTION_NAMES,
  ownsPool: true,
} satisfies Record<keyof PostgresIdempotencyStoreOptions, true>);

/** Every name the module option `postgres` takes in its object form. */
export const CONFIG = Object.keys({
  ...SQL_STORE_OPTION_NAMES,
  ...SQL_CONNECTION_NAMES,
} satisfies Record<keyof IdempotencyPostgresConfig, true>);

/**
 * Why the store's constructor options are invalid (an unknown name, or a value starting with the
 * option's name), or undefined when they are valid.
 */
export function checkPostgresStoreOptions(
  options: PostgresIdempotencyStoreOptions,
): string | undefined {
  return unknownOptionProblem(options, STORE_OPTIONS) ?? checkValues(options);
}

function checkValues(options: PostgresIdempotencyStoreOptions): string | undefined {
  return checkSqlStoreOptions(options, MAX_NAME, ' (it names the NOTIFY channel)');
}

/** Whether `value` is a node-postgres `Pool` (a `Client` has no totalCount). */
export function isPgPool(value: unknown): value is Pool {
  const pool = value as Partial<Record<'query' | 'connect' | 'totalCount', unknown>> | null;
  return (
    typeof pool?.query === 'function' &&
    typeof pool.connect === 'function' &&
    typeof pool.totalCount === 'number'
  );
}

/**
 * Why the `postgres` module option is invalid (a message naming it), or undefined when it is
 * valid: a connection string, a pg.Pool, or a config with at most one of connectionString and
 * pool, and valid store options.
 */
export function checkPostgresOption(value: unknown): string | undefined {
  return checkSqlOption(value, {
    option: 'postgres',
    pool: 'a pg.Pool',
    settings: 'pg.Pool settings',
    names: CONFIG,
    isPool: isPgPool,
    checkValues,
  });
}
