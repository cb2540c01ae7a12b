import type { Pool } from 'mysql2';
import type { Pool as PromisePool } from 'mysql2/promise';
import { SqlIdempotencyStore } from '../sql/sql-store';
import { MysqlDialect } from './mysql-dialect';
import { ownSqlOptions } from '../sql/options';
import {
  checkMysqlStoreOptions,
  type MysqlIdempotencyStoreOptions,
  STORE_OPTIONS,
} from './mysql-options';
import { DEFAULT_MYSQL_TABLE } from './mysql-statements';

export { mysqlListingSchemaSql, mysqlSchemaSql, mysqlStepsSchemaSql } from './mysql-schema';
export { mysqlStepsTableName } from './mysql-steps';
export type { IdempotencyMysqlConfig, MysqlIdempotencyStoreOptions } from './mysql-options';

/**
 * The MySQL/MariaDB store: one InnoDB row per record, leases and retention on the database's
 * clock, owner-token fencing in every write. Works on a mysql2 pool. Every operation is one
 * statement except a claim that finds the key held (a second statement reads the record: MySQL's
 * INSERT returns no row) and an operator's delete of an expired record.
 *
 * Waiting duplicates (`onConflict: 'wait'`): MySQL has no LISTEN/NOTIFY. A completion, release
 * or deletion by this process wakes its waiters at once; for other processes' one statement per
 * process polls the watched keys, backing off from 25 ms to `waitPollMaxMs` (see docs/mysql.md).
 *
 * With {@link completeInTransaction} the completion is written in the application's own
 * transaction, so the record commits (or rolls back) with the handler's writes; waiters in other
 * processes see it at their next poll, which comes soon.
 *
 * Steps of resumable runs live in a table beside the records' (`<table>_steps`), written by
 * {@link recordStep} (or {@link recordStepInTransaction}, with the step's own writes) and read by
 * resumable claims; the other runs' statements never touch it.
 *
 * The SQL store core (`SqlIdempotencyStore`) on the MySQL dialect (mysql-dialect.ts).
 */
export class MysqlIdempotencyStore extends SqlIdempotencyStore {
  /** The pool, through mysql2's promise API. */
  readonly pool: PromisePool;

  constructor(
    /** A mysql2 pool, callback or promise API. */
    pool: Pool | PromisePool,
    options: MysqlIdempotencyStoreOptions = {},
  ) {
    options = ownSqlOptions(options, STORE_OPTIONS);
    const problem = checkMysqlStoreOptions(options);
    if (problem) throw new TypeError(`MysqlIdempotencyStore: ${problem}`);
    const callbackPool = pool as Pool;
    const promisePool =
      typeof callbackPool.promise === 'function' && !('pool' in pool)
        ? callbackPool.promise()
        : (pool as PromisePool);
    const table = options.table ?? DEFAULT_MYSQL_TABLE;
    super(
      new MysqlDialect(promisePool, table, {
        ownsPool: options.ownsPool === true,
        waitPollMaxMs: options.waitPollMaxMs ?? 1_000,
      }),
      options,
    );
    this.pool = promisePool;
  }
}
