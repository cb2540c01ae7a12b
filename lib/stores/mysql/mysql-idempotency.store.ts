import { Logger } from '@nestjs/common';
import type { Pool } from 'mysql2';
import type { Pool as PromisePool } from 'mysql2/promise';
import {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  TransactionalIdempotencyStore,
  WatchListener,
} from '../idempotency.store';
import { checkMysqlStoreOptions, type MysqlIdempotencyStoreOptions } from './mysql-options';
import { MysqlPoller } from './mysql-poller';
import { MysqlSchema } from './mysql-schema';
import { DEFAULT_MYSQL_TABLE, mysqlStatements, MysqlStatements } from './mysql-statements';
import { within } from '../sql/errors';
import { Sweeper } from '../sql/sweeper';
import { affectedRows, queryInTransaction } from '../sql/transaction';
import { Watchers } from '../sql/watchers';

export { mysqlSchemaSql } from './mysql-statements';
export type { IdempotencyMysqlConfig, MysqlIdempotencyStoreOptions } from './mysql-options';

/** A claim that finds neither its own row nor another's lost a rare race (see claim); retries. */
const CLAIM_ATTEMPTS = 5;
/** How long close() waits for an owned pool to end, in ms. */
const CLOSE_TIMEOUT_MS = 2_000;
/** Most keys one poll statement checks. */
const POLL_CHUNK = 500;

interface LookupRow {
  state: string;
  left_us: number | string;
  mismatch: number | string;
  meta: string | null;
  body: Buffer | null;
}

interface InspectRow {
  state: string;
  meta: string | null;
  bytes: number | string | null;
  left_us: number | string;
  age_us: number | string | null;
}

/** µs from the database (BIGINT: a string when the pool has bigNumberStrings) in whole ms. */
const ms = (us: number | string | null) => Math.max(Math.floor(Number(us ?? 0) / 1000), 0);

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
 * transaction, so the record commits (or rolls back) with the handler's writes.
 */
export class MysqlIdempotencyStore
  extends IdempotencyStore
  implements TransactionalIdempotencyStore
{
  /** `'MySQL'`, in log lines. */
  override readonly displayName = 'MySQL';
  /** The table, as configured. */
  readonly table: string;
  /** The pool, through mysql2's promise API. */
  readonly pool: PromisePool;
  private readonly sql: MysqlStatements;
  private readonly logger = new Logger('Idempotency');
  private readonly watchers = new Watchers();
  private readonly poller: MysqlPoller;
  private readonly sweeper: Sweeper;
  private readonly schema: MysqlSchema;
  private closed = false;
  private closing?: Promise<void>;

  constructor(
    /** A mysql2 pool, callback or promise API. */
    pool: Pool | PromisePool,
    private readonly options: MysqlIdempotencyStoreOptions = {},
  ) {
    super();
    const problem = checkMysqlStoreOptions(options);
    if (problem) throw new TypeError(`MysqlIdempotencyStore: ${problem}`);
    const callbackPool = pool as Pool;
    this.pool =
      typeof callbackPool.promise === 'function' && !('pool' in pool)
        ? callbackPool.promise()
        : (pool as PromisePool);
    this.table = options.table ?? DEFAULT_MYSQL_TABLE;
    this.sql = mysqlStatements(this.table);
    this.schema = new MysqlSchema(this.pool, this.table, this.logger);
    this.sweeper = new Sweeper(
      async (batch) => (await this.write('sweep', [batch])).affectedRows,
      options.sweepBatchSize ?? 500,
      this.logger,
    );
    this.sweeper.every(options.sweepIntervalMs ?? 60_000, () => void this.sweep());
    this.poller = new MysqlPoller(
      this.watchers,
      (keys) => this.pending(keys),
      options.waitPollMaxMs ?? 1_000,
      this.logger,
    );
  }

  /**
   * One statement when the key is free or expired. When it is held, a second statement reads the
   * record; if that finds none (released or expired in between), claim again.
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const { token, fingerprint, leaseMs } = request;
    const lease = leaseMs * 1000;
    for (let attempt = 1; ; attempt++) {
      const ok = await this.write('claim', [
        key,
        fingerprint,
        token,
        lease,
        fingerprint,
        token,
        lease,
      ]);
      if (Number(ok.insertId) !== 1) return { status: 'claimed' };
      const f = fingerprint;
      const [row] = await this.read<LookupRow>('lookup', [f, f, f, f, f, f, key]);
      if (row) {
        if (Number(row.mismatch) === 1) return { status: 'key_reused' };
        if (row.state === 'c') {
          const response = { meta: row.meta ?? '', body: row.body ?? Buffer.alloc(0) };
          return { status: 'completed', response };
        }
        return { status: 'in_progress', retryAfterMs: ms(row.left_us) };
      }
      if (attempt === CLAIM_ATTEMPTS) {
        throw new Error(`MysqlIdempotencyStore: the record ${key} kept changing under claim`);
      }
    }
  }

  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
  ): Promise<boolean> {
    const values = [response.meta, response.body, ttlMs * 1000, key, token];
    const done = (await this.write('complete', values)).affectedRows === 1;
    if (done) this.watchers.wake(key);
    return done;
  }

  async release(key: string, token: string): Promise<boolean> {
    const done = (await this.write('release', [key, token])).affectedRows === 1;
    if (done) this.watchers.wake(key);
    return done;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.write('extend', [leaseMs * 1000, key, token])).affectedRows === 1;
  }

  override async inspect(key: string): Promise<RecordInspection> {
    const [row] = await this.read<InspectRow>('inspect', [key]);
    if (!row) return { state: 'absent' };
    if (row.state === 'p') return { state: 'pending', leaseMsLeft: ms(row.left_us) };
    return {
      state: 'completed',
      meta: row.meta ?? '',
      bytes: Number(row.bytes ?? 0),
      ageMs: ms(row.age_us),
      ttlMsLeft: ms(row.left_us),
    };
  }

  /** Two statements when the record expired: its row goes too, so its owner cannot complete it. */
  override async delete(key: string): Promise<boolean> {
    const live = (await this.write('deleteLive', [key])).affectedRows === 1;
    if (!live) await this.write('deleteAny', [key]);
    this.watchers.wake(key);
    return live;
  }

  /**
   * Writes the completion through `tx`, the app's open transaction, as its `TransactionHost`
   * exposes it: a TypeORM `EntityManager` or `QueryRunner`, a mysql2 connection (after BEGIN), a
   * Knex, Kysely or Drizzle transaction or a Prisma interactive-transaction client. It commits
   * with the transaction. Never rolls back itself.
   * Waiters in other processes see it at their next poll, which comes soon.
   * @returns false when `token` no longer owns the pending record: roll the transaction back.
   */
  async completeInTransaction(
    tx: unknown,
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
  ): Promise<boolean> {
    const values = [response.meta, response.body, ttlMs * 1000, key, token];
    const result = await queryInTransaction(tx, this.sql.complete, values, '?');
    const done = affectedRows(result) === 1;
    // Not woken now: the transaction has not committed. The poll finds it once it has.
    if (done) this.poller.soon();
    return done;
  }

  /**
   * Calls `listener` when the record at `key` may have changed: at once for a completion,
   * release or deletion by this store, else at the poll that finds it no longer pending.
   */
  override async watch(key: string, listener: WatchListener): Promise<() => void> {
    if (this.closed) throw new Error('the idempotency store is closed');
    const unwatch = this.watchers.add(key, listener);
    this.poller.soon();
    return unwatch;
  }

  /**
   * Resolves true once the database answers (with ensureSchema: once the table exists), false
   * after `timeoutMs` or on an error: the module warns and boots anyway. A missing table or
   * database is logged as such, with the migration to apply, and resolves true: the database is
   * there, and first use reports the same.
   */
  override whenReady(timeoutMs: number): Promise<boolean> {
    return this.schema.whenReady(this.options.ensureSchema === true, timeoutMs);
  }

  /** Deletes expired rows in batches of `sweepBatchSize`; never two at once. @returns the rows. */
  sweep(): Promise<number> {
    return this.sweeper.sweep();
  }

  /** Stops the sweeper and the poll and, if the store owns the pool, ends it. */
  override close(): Promise<void> {
    return (this.closing ??= this.shutdown());
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    this.poller.stop();
    this.watchers.clear();
    if (this.options.ownsPool)
      await within(
        this.pool.end().catch(() => {}),
        CLOSE_TIMEOUT_MS,
      );
  }

  /** Runs a write statement of the store; resolves its OK packet. */
  private async write(
    name: Exclude<keyof MysqlStatements, 'pending'>,
    values: unknown[],
  ): Promise<{ affectedRows: number; insertId: number }> {
    const [result] = await this.run(this.sql[name], values);
    return result as { affectedRows: number; insertId: number };
  }

  private async read<T>(name: 'lookup' | 'inspect', values: unknown[]): Promise<T[]> {
    const [rows] = await this.run(this.sql[name], values);
    return rows as T[];
  }

  private async run(sql: string, values: unknown[]) {
    if (this.options.ensureSchema) await this.schema.ensure();
    try {
      return await this.pool.query(sql, values);
    } catch (error) {
      // ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR: a missing migration, not an outage.
      const code = (error as { code?: string }).code;
      if (code === 'ER_NO_SUCH_TABLE' || code === 'ER_BAD_DB_ERROR') {
        throw new Error(this.schema.missing(code !== 'ER_BAD_DB_ERROR'), { cause: error });
      }
      throw error;
    }
  }

  private async pending(keys: string[]): Promise<Set<string>> {
    const pending = new Set<string>();
    for (let i = 0; i < keys.length; i += POLL_CHUNK) {
      const chunk = keys.slice(i, i + POLL_CHUNK);
      const [rows] = await this.run(this.sql.pending(chunk.length), chunk);
      for (const row of rows as { key: Buffer | string }[]) pending.add(row.key.toString());
    }
    return pending;
  }
}
