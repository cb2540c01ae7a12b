import { Logger } from '@nestjs/common';
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
import type { ListRecordsPage, ListRecordsQuery, RecordCounts } from '../record-listing';
import type { SqlContext, SqlDialect, SqlNotifier } from './sql-dialect';
import { SqlListing } from './sql-listing';
import type { SqlStoreOptions } from './options';
import { SqlQueries } from './sql-queries';
import { inspection } from './sql-rows';
import { SqlSchema } from './sql-schema';
import { Sweeper } from './sweeper';
import { Watchers } from './watchers';

/** A claim that finds neither its own row nor another's lost a rare race (see claim); retries. */
const CLAIM_ATTEMPTS = 5;

/**
 * The SQL store, once for every database: one row per record in one table, leases and retention
 * on the database's clock, owner-token fencing in every write, a sweeper that deletes expired
 * rows in small batches. What differs between databases (statements, driver, the flow of a claim
 * and of an operator's delete, how waiters are woken) is its {@link SqlDialect}:
 * `PostgresIdempotencyStore` and `MysqlIdempotencyStore` are this store on theirs.
 *
 * With {@link completeInTransaction} the completion is written in the application's own
 * transaction, so the record commits (or rolls back) with the handler's writes.
 *
 * Steps of resumable runs live in a table beside the records' (`<table>_steps`), written by
 * {@link recordStep} (or {@link recordStepInTransaction}, with the step's own writes) and read by
 * resumable claims; the other runs' statements never touch it.
 */
export abstract class SqlIdempotencyStore
  extends IdempotencyStore
  implements TransactionalIdempotencyStore
{
  /** The database's name (`'PostgreSQL'`, `'MySQL'`), in log lines. */
  override readonly displayName: string;
  /** The table, as configured. */
  readonly table: string;
  private readonly logger = new Logger('Idempotency');
  private readonly watchers = new Watchers();
  private readonly schema: SqlSchema;
  private readonly queries: SqlQueries;
  private readonly context: SqlContext;
  private readonly notifier: SqlNotifier;
  private readonly sweeper: Sweeper;
  private readonly listing: SqlListing;
  private readonly ensureSchema: boolean;
  private closed = false;
  private closing?: Promise<void>;

  protected constructor(
    private readonly dialect: SqlDialect,
    options: SqlStoreOptions,
  ) {
    super();
    this.displayName = dialect.name;
    this.table = dialect.table;
    this.ensureSchema = options.ensureSchema === true;
    this.schema = new SqlSchema(dialect, this.logger);
    this.queries = new SqlQueries(dialect, this.schema, this.ensureSchema);
    this.context = {
      queries: this.queries,
      watchers: this.watchers,
      logger: this.logger,
      release: (key, token) => this.release(key, token),
    };
    this.notifier = dialect.notifier(this.context);
    this.listing = new SqlListing(dialect, this.queries);
    this.sweeper = new Sweeper(
      this.queries.sweepBatches(),
      options.sweepBatchSize ?? 500,
      this.logger,
    );
    this.sweeper.every(options.sweepIntervalMs ?? 60_000, () => void this.sweep());
  }

  /**
   * Takes the key if it is free (absent, expired or released), else reports its state; runs
   * again when it lost a race with another claim (the dialect says when). A `resumable` claim
   * that takes the key also returns the steps recorded under it, in index order.
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.dialect.claim(this.context, key, request);
      if (outcome) return outcome;
      if (attempt === CLAIM_ATTEMPTS) {
        throw new Error(`${this.constructor.name}: the record ${key} kept changing under claim`);
      }
    }
  }

  /** With `clearSteps`, the key's steps go in the same statement. */
  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const { complete, completeClearing } = this.dialect.sql;
    const statement = options?.clearSteps ? completeClearing : complete;
    const done = (await this.queries.changed(statement, { key, token, response, ttlMs })) > 0;
    if (done) this.notifier.changed(key);
    return done;
  }

  /** Releases the claim; the steps recorded under it stay, for the retry to resume from. */
  async release(key: string, token: string): Promise<boolean> {
    const done = (await this.queries.changed(this.dialect.sql.release, { key, token })) > 0;
    if (done) this.notifier.changed(key);
    return done;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.queries.changed(this.dialect.sql.extend, { key, token, leaseMs })) === 1;
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
    const params = { key, token, step, ttlMs };
    return (await this.queries.changed(this.dialect.sql.recordStep, params)) > 0;
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
    const params = { key, token, step, ttlMs };
    const statement = this.dialect.sql.recordStep;
    return (await this.queries.inTransaction(tx, statement, params, 'recordStepInTransaction')) > 0;
  }

  /** For a pending or absent record, also the names of the steps recorded under its key. */
  override async inspect(key: string): Promise<RecordInspection> {
    const [[row], steps] = await Promise.all([
      this.queries.rows(this.dialect.sql.inspect, { key }),
      this.queries.stepNames(key),
    ]);
    return inspection(this.dialect.inspected(row), steps);
  }

  /**
   * The record goes whatever its state, with the key's steps (once the steps table exists).
   * @returns whether it deleted a live record, or the steps of one that is gone.
   */
  override async delete(key: string): Promise<boolean> {
    const deleted = await this.dialect.delete(this.context, key);
    this.notifier.changed(key);
    return deleted;
  }

  /**
   * Writes the completion through `tx`, the app's open transaction, as its `TransactionHost`
   * exposes it: a TypeORM `EntityManager` or `QueryRunner`, a node-postgres or mysql2 client
   * (after BEGIN), a Knex, Kysely or Drizzle transaction or a Prisma interactive-transaction
   * client. It commits with the transaction, and waiters hear of it once it has. Never rolls
   * back itself. With `clearSteps`, the key's steps go in the same statement.
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
    const { complete, completeClearing } = this.dialect.sql;
    const statement = options?.clearSteps ? completeClearing : complete;
    const params = { key, token, response, ttlMs };
    const changed = await this.queries.inTransaction(
      tx,
      statement,
      params,
      'completeInTransaction',
    );
    // Not woken now: the transaction has not committed.
    if (changed > 0) this.notifier.committing();
    return changed > 0;
  }

  /**
   * Calls `listener` when the record at `key` may have changed (completion, release, deletion),
   * without the response: the waiter claims to replay it. Resolves once changes reach it.
   */
  override async watch(key: string, listener: WatchListener): Promise<() => void> {
    // A connection opened for it now would never be released.
    if (this.closed) throw new Error('the idempotency store is closed');
    const unwatch = this.watchers.add(key, listener);
    try {
      await this.notifier.watching();
    } catch (error) {
      unwatch();
      throw error;
    }
    return unwatch;
  }

  /**
   * One statement on the records' table (and, for the items' steps, one on the steps table),
   * served by an index: migration 003's, partial ones on PostgreSQL.
   */
  override list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    return this.listing.list(query);
  }

  override countRecords(prefix: string, stuckAfterMs?: number): Promise<RecordCounts> {
    return this.listing.countRecords(prefix, stuckAfterMs);
  }

  /** One UPDATE of the record's row, which serialises concurrent callers. */
  override markAbandoned(key: string, endedBefore: number): Promise<boolean> {
    return this.listing.markAbandoned(key, endedBefore);
  }

  /**
   * Resolves true once the database answers (with ensureSchema: once the tables exist), false
   * after `timeoutMs` or on an error: the module warns and boots anyway. A missing table or
   * schema is logged as such, with the migration to apply, and resolves true: the database is
   * there, and first use reports the same.
   */
  override whenReady(timeoutMs: number): Promise<boolean> {
    return this.schema.whenReady(this.ensureSchema, timeoutMs);
  }

  /**
   * Deletes expired rows (records, then steps) in batches of `sweepBatchSize` until a batch comes
   * back short. Runs on the interval; never two at once. @returns the rows deleted.
   */
  sweep(): Promise<number> {
    return this.sweeper.sweep();
  }

  /**
   * Stops the sweeper and the waiters' notifications and, if the store owns the pool, ends it
   * (bounded: after 2 s without an answer, a frozen server, its connections are cut).
   */
  override close(): Promise<void> {
    return (this.closing ??= this.shutdown());
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    this.watchers.clear();
    this.notifier.close();
    await this.dialect.end();
  }
}
