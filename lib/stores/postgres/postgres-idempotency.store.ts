import type { Pool } from 'pg';
import { SqlIdempotencyStore } from '../sql/sql-store';
import { PostgresDialect } from './postgres-dialect';
import { ownSqlOptions } from '../sql/options';
import {
  checkPostgresStoreOptions,
  type PostgresIdempotencyStoreOptions,
  STORE_OPTIONS,
} from './postgres-options';
import { DEFAULT_TABLE } from './postgres-statements';

export {
  expiryIndexName,
  postgresListingSchemaSql,
  postgresSchemaSql,
  postgresStepsSchemaSql,
} from './postgres-schema';
export { postgresStepsTableName } from './postgres-steps';
export type {
  IdempotencyPostgresConfig,
  PostgresIdempotencyStoreOptions,
} from './postgres-options';

/**
 * The PostgreSQL store: one row per record in one table, every operation one statement (one
 * round trip, atomic), leases and retention on the database's clock. Works on a `pg.Pool`.
 *
 * Waiting duplicates (`onConflict: 'wait'`) are notified through LISTEN/NOTIFY on one channel
 * named like the table, dispatched by key: one connection of the pool is held for LISTEN from
 * the first wait until {@link close}. Expired rows are deleted in small batches on an interval.
 *
 * With {@link completeInTransaction} the completion is written in the application's own
 * transaction, so the record commits (or rolls back) with the handler's writes.
 *
 * Steps of resumable runs live in a table beside the records' (`<table>_steps`), written by
 * {@link recordStep} (or {@link recordStepInTransaction}, with the step's own writes) and read by
 * resumable claims; the other runs' statements never touch it.
 *
 * The SQL store core (`SqlIdempotencyStore`) on the PostgreSQL dialect (postgres-dialect.ts).
 */
export class PostgresIdempotencyStore extends SqlIdempotencyStore {
  constructor(
    /** The node-postgres pool. */
    readonly pool: Pool,
    options: PostgresIdempotencyStoreOptions = {},
  ) {
    options = ownSqlOptions(options, STORE_OPTIONS);
    const problem = checkPostgresStoreOptions(options);
    if (problem) throw new TypeError(`PostgresIdempotencyStore: ${problem}`);
    const table = options.table ?? DEFAULT_TABLE;
    super(new PostgresDialect(pool, table, options.ownsPool === true), options);
  }
}
