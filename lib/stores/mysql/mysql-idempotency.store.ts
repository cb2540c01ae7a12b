import { Logger } from '@nestjs/common';
import type { Pool } from 'mysql2';
import type { Pool as PromisePool } from 'mysql2/promise';
import {
  ClaimRequest,
  ClaimResult,
  CompleteOptions,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  StoredStep,
  TransactionalIdempotencyStore,
  WatchListener,
} from '../idempotency.store';
import { checkMysqlStoreOptions, type MysqlIdempotencyStoreOptions } from './mysql-options';
import { MysqlPoller } from './mysql-poller';
import { MysqlQueries } from './mysql-queries';
import { heldOutcome, type InspectRow, inspection, type LookupRow } from './mysql-rows';
import { MysqlSchema } from './mysql-schema';
import { DEFAULT_MYSQL_TABLE } from './mysql-statements';
import { foreign, type StepRow, stepValues, storedSteps } from './mysql-steps';
import { within } from '../sql/errors';
import { Sweeper } from '../sql/sweeper';
import { affectedRows } from '../sql/transaction';
import { Watchers } from '../sql/watchers';

export { mysqlSchemaSql } from './mysql-statements';
export { mysqlStepsSchemaSql, mysqlStepsTableName } from './mysql-steps';
export type { IdempotencyMysqlConfig, MysqlIdempotencyStoreOptions } from './mysql-options';

/** A claim that finds neither its own row nor another's lost a rare race (see claim); retries. */
const CLAIM_ATTEMPTS = 5;
/** How long close() waits for an owned pool to end, in ms. */
const CLOSE_TIMEOUT_MS = 2_000;

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
 *
 * Steps of resumable runs live in a table beside the records' (`<table>_steps`), written by
 * {@link recordStep} (or {@link recordStepInTransaction}, with the step's own writes) and read by
 * resumable claims; the other runs' statements never touch it.
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
  private readonly queries: MysqlQueries;
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
    this.schema = new MysqlSchema(this.pool, this.table, this.logger);
    const queries = new MysqlQueries(this.pool, this.table, this.schema, !!options.ensureSchema);
    this.queries = queries;
    this.sweeper = new Sweeper(queries.sweepBatches(), options.sweepBatchSize ?? 500, this.logger);
    this.sweeper.every(options.sweepIntervalMs ?? 60_000, () => void this.sweep());
    this.poller = new MysqlPoller(
      this.watchers,
      (keys) => queries.pending(keys),
      options.waitPollMaxMs ?? 1_000,
      this.logger,
    );
  }

  /**
   * One statement when the key is free or expired. When it is held, a second statement reads the
   * record; if that finds none (released or expired in between), claim again. A `resumable`
   * claim that takes the key reads its steps with a second statement (see resumed).
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const { token, fingerprint, leaseMs } = request;
    const lease = leaseMs * 1000;
    for (let attempt = 1; ; attempt++) {
      const ok = await this.queries.write('claim', [
        key,
        fingerprint,
        token,
        lease,
        fingerprint,
        token,
        lease,
      ]);
      if (Number(ok.insertId) !== 1) {
        return request.resumable ? this.resumed(key, token, fingerprint) : { status: 'claimed' };
      }
      const f = fingerprint;
      const [row] = await this.queries.read<LookupRow>('lookup', [f, f, f, f, f, f, key]);
      if (row) return heldOutcome(row);
      if (attempt === CLAIM_ATTEMPTS) {
        throw new Error(`MysqlIdempotencyStore: the record ${key} kept changing under claim`);
      }
    }
  }

  /** With `clearSteps`, the key's steps expire in the same statement (see completeSql). */
  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const values = [response.meta, response.body, ttlMs * 1000, key, token];
    const done = options?.clearSteps
      ? (await this.queries.write('completeClearing', values)).affectedRows > 0
      : (await this.queries.write('complete', values)).affectedRows === 1;
    if (done) this.watchers.wake(key);
    return done;
  }

  /** Releases the claim; the steps recorded under it stay, for the retry to resume from. */
  async release(key: string, token: string): Promise<boolean> {
    const done = (await this.queries.write('release', [key, token])).affectedRows === 1;
    if (done) this.watchers.wake(key);
    return done;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const values = [leaseMs * 1000, key, token];
    return (await this.queries.write('extend', values)).affectedRows === 1;
  }

  /**
   * One statement: the step goes into the steps table only while `token` owns the pending
   * record, kept `ttlMs` from now.
   */
  override async recordStep(
    key: string,
    token: string,
    step: StoredStep,
    ttlMs: number,
  ): Promise<boolean> {
    const values = stepValues(key, token, step, ttlMs);
    return (await this.queries.write('recordStep', values)).affectedRows > 0;
  }

  /**
   * {@link recordStep} through `tx`, the app's open transaction (the handles of
   * {@link completeInTransaction}): the step's own writes and its record commit together. The
   * record's row stays locked until the transaction ends.
   * @returns false when `token` no longer owns the record: roll the transaction back.
   */
  async recordStepInTransaction(
    tx: unknown,
    key: string,
    token: string,
    step: StoredStep,
    ttlMs: number,
  ): Promise<boolean> {
    const values = stepValues(key, token, step, ttlMs);
    const operation = 'recordStepInTransaction';
    return affectedRows(await this.queries.inTransaction(tx, 'recordStep', values, operation)) > 0;
  }

  /** For a pending or absent record, also the names of the steps recorded under its key. */
  override async inspect(key: string): Promise<RecordInspection> {
    const [[row], steps] = await Promise.all([
      this.queries.read<InspectRow>('inspect', [key]),
      this.queries.stepNames(key),
    ]);
    return inspection(row, steps);
  }

  /**
   * Two statements when the record expired: its row goes too, so its owner cannot complete it.
   * Then the key's steps (once the steps table exists). @returns whether it deleted a live
   * record, or the steps of one that is gone.
   */
  override async delete(key: string): Promise<boolean> {
    const live = (await this.queries.write('deleteLive', [key])).affectedRows === 1;
    if (!live) await this.queries.write('deleteAny', [key]);
    const steps = await this.queries.deleteSteps(key);
    this.watchers.wake(key);
    return live || steps > 0;
  }

  /**
   * Writes the completion through `tx`, the app's open transaction, as its `TransactionHost`
   * exposes it: a TypeORM `EntityManager` or `QueryRunner`, a mysql2 connection (after BEGIN), a
   * Knex, Kysely or Drizzle transaction or a Prisma interactive-transaction client. It commits
   * with the transaction. Never rolls back itself.
   * Waiters in other processes see it at their next poll, which comes soon. With `clearSteps`,
   * the key's steps expire in the same statement.
   * @returns false when `token` no longer owns the pending record: roll the transaction back.
   */
  async completeInTransaction(
    tx: unknown,
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const values = [response.meta, response.body, ttlMs * 1000, key, token];
    const statement = options?.clearSteps ? 'completeClearing' : 'complete';
    const result = await this.queries.inTransaction(tx, statement, values, 'completeInTransaction');
    const done = options?.clearSteps ? affectedRows(result) > 0 : affectedRows(result) === 1;
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

  /**
   * The claim of a resumable run that took the key: the steps recorded under it, read once the
   * claim has committed (MySQL's INSERT returns no rows). Steps of another payload: the claim
   * is released, and the key is key_reused. A failure (no steps table) releases it too.
   */
  private async resumed(key: string, token: string, fingerprint: string): Promise<ClaimResult> {
    let rows: StepRow[];
    try {
      rows = await this.queries.read<StepRow>('claimedSteps', [key]);
    } catch (error) {
      await this.release(key, token).catch(() => false);
      throw error;
    }
    if (rows.some((row) => foreign(row, fingerprint))) {
      await this.release(key, token);
      return { status: 'key_reused' };
    }
    const steps = storedSteps(rows);
    return steps ? { status: 'claimed', steps } : { status: 'claimed' };
  }
}
