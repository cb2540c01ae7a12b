import { Logger } from '@nestjs/common';
import type { Client, Pool } from 'pg';
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
import {
  checkPostgresStoreOptions,
  type PostgresIdempotencyStoreOptions,
} from './postgres-options';
import { PostgresConnections } from './postgres-connections';
import { PostgresListener } from './postgres-listener';
import { PostgresQueries } from './postgres-queries';
import { PostgresSchema } from './postgres-schema';
import { DEFAULT_TABLE } from './postgres-statements';
import { claimOutcome, type ClaimRow, type InspectRow, inspection } from './postgres-rows';
import { stepValues } from './postgres-steps';
import { Sweeper } from '../sql/sweeper';
import { resultRows } from '../sql/transaction';
import { Watchers } from '../sql/watchers';

export { expiryIndexName, postgresSchemaSql } from './postgres-statements';
export { postgresStepsSchemaSql, postgresStepsTableName } from './postgres-steps';
export type {
  IdempotencyPostgresConfig,
  PostgresIdempotencyStoreOptions,
} from './postgres-options';

/** A claim that finds neither its own row nor another's lost a rare race (see claim); retries. */
const CLAIM_ATTEMPTS = 5;

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
 */
export class PostgresIdempotencyStore
  extends IdempotencyStore
  implements TransactionalIdempotencyStore
{
  /** `'PostgreSQL'`, in log lines. */
  override readonly displayName = 'PostgreSQL';
  /** The table, as configured. */
  readonly table: string;
  private readonly channel: string;
  private readonly queries: PostgresQueries;
  private readonly logger = new Logger('Idempotency');
  private readonly watchers = new Watchers();
  private readonly listener: PostgresListener;
  private readonly schema: PostgresSchema;
  private readonly sweeper: Sweeper;
  /** The connections close() waits for (and cuts, on a frozen server). */
  private readonly connections: PostgresConnections;
  private closed = false;
  private closing?: Promise<void>;

  constructor(
    /** The node-postgres pool. */
    readonly pool: Pool,
    private readonly options: PostgresIdempotencyStoreOptions = {},
  ) {
    super();
    const problem = checkPostgresStoreOptions(options);
    if (problem) throw new TypeError(`PostgresIdempotencyStore: ${problem}`);
    this.table = options.table ?? DEFAULT_TABLE;
    this.channel = this.table;
    this.schema = new PostgresSchema(pool, this.table, this.logger);
    this.queries = new PostgresQueries(
      pool,
      this.table,
      this.schema,
      options.ensureSchema === true,
    );
    const connections = new PostgresConnections(pool, options.ownsPool === true);
    this.connections = connections;
    const track = (client: Client) => connections.track(client);
    this.listener = new PostgresListener(pool, this.channel, this.watchers, this.logger, track);
    this.sweeper = new Sweeper(
      this.queries.sweepBatches(),
      options.sweepBatchSize ?? 500,
      this.logger,
    );
    this.sweeper.every(options.sweepIntervalMs ?? 60_000, () => void this.sweep());
  }

  /**
   * One statement in the common case; again when it lost a race (see claimOutcome).
   *
   * A `resumable` claim is the same statement with the key's steps read in it (see
   * postgres-steps.ts), returned in index order when it takes the key.
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const { token, fingerprint, leaseMs, waiting = false, resumable = false } = request;
    const statement = resumable ? 'claimResumable' : 'claim';
    for (let attempt = 1; ; attempt++) {
      const rows = await this.queries.rows<ClaimRow>(statement, [
        key,
        token,
        fingerprint,
        leaseMs,
        waiting,
      ]);
      const outcome = claimOutcome(rows, waiting);
      if (outcome) return outcome;
      if (attempt === CLAIM_ATTEMPTS) {
        throw new Error(`PostgresIdempotencyStore: the record ${key} kept changing under claim`);
      }
    }
  }

  /** With `clearSteps`, the key's steps are deleted by the same statement. */
  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const values = [key, token, response.meta, response.body, ttlMs, this.channel];
    const statement = options?.clearSteps ? 'completeClearing' : 'complete';
    const [row] = await this.queries.rows<{ n: number }>(statement, values);
    return row.n === 1;
  }

  /** Releases the claim; the steps recorded under it stay, for the retry to resume from. */
  async release(key: string, token: string): Promise<boolean> {
    const [row] = await this.queries.rows<{ n: number }>('release', [key, token, this.channel]);
    return row.n === 1;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const result = await this.queries.run('extend', [key, token, leaseMs]);
    return result.rowCount === 1;
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
    const [row] = await this.queries.rows<{ n: number }>(
      'recordStep',
      stepValues(key, token, step, ttlMs),
    );
    return row.n === 1;
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
    const result = await this.queries.inTransaction(
      tx,
      'recordStep',
      values,
      'recordStepInTransaction',
    );
    return Number((resultRows(result)[0] as { n?: unknown } | undefined)?.n) === 1;
  }

  /** For a pending or absent record, also the names of the steps recorded under its key. */
  override async inspect(key: string): Promise<RecordInspection> {
    const [[row], steps] = await Promise.all([
      this.queries.rows<InspectRow>('inspect', [key]),
      this.queries.stepNames(key),
    ]);
    return inspection(row, steps);
  }

  /**
   * The key's steps go too, in the same statement (once the steps table exists).
   * @returns whether it deleted a live record, or the steps of one that is gone.
   */
  override async delete(key: string): Promise<boolean> {
    const statement = (await this.queries.hasSteps()) ? 'deleteWithSteps' : 'delete';
    const [row] = await this.queries.rows<{ n: number; steps?: number }>(statement, [
      key,
      this.channel,
    ]);
    return row.n === 1 || (row.steps ?? 0) > 0;
  }

  /**
   * Writes the completion through `tx`, the app's open transaction, as its `TransactionHost`
   * exposes it: a TypeORM `EntityManager` or `QueryRunner`, a node-postgres client (after BEGIN),
   * a Knex, Kysely or Drizzle transaction or a Prisma interactive-transaction client. It commits
   * with the transaction, and waiters are notified at that commit. Never rolls back itself.
   * With `clearSteps`, the key's steps are deleted by the same statement.
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
    const values = [key, token, response.meta, response.body, ttlMs, this.channel];
    const statement = options?.clearSteps ? 'completeClearing' : 'complete';
    const result = await this.queries.inTransaction(tx, statement, values, 'completeInTransaction');
    const [row] = resultRows(result);
    return Number((row as { n?: unknown } | undefined)?.n) === 1;
  }

  /**
   * Calls `listener` on each notification for `key` (completion and release of a waited-on
   * record, deletion), without the response: the waiter claims to replay it. Resolves once
   * LISTEN is active. After the LISTEN connection was lost and reopened, every listener is
   * called, since notifications may have been missed meanwhile.
   */
  override async watch(key: string, listener: WatchListener): Promise<() => void> {
    // A LISTEN connection opened now would never be released.
    if (this.closed) throw new Error('the idempotency store is closed');
    const unwatch = this.watchers.add(key, listener);
    try {
      await this.listener.listen();
    } catch (error) {
      unwatch();
      throw error;
    }
    return unwatch;
  }

  /**
   * Resolves true once the database answers (and, with ensureSchema, the table exists), false
   * after `timeoutMs` or on an error: the module warns and boots anyway.
   */
  override whenReady(timeoutMs: number): Promise<boolean> {
    return this.schema.whenReady(this.options.ensureSchema === true, timeoutMs);
  }

  /**
   * Deletes expired rows (records, then steps) in batches of `sweepBatchSize` until a batch comes
   * back short. Runs on the interval; never two at once. @returns the rows deleted.
   */
  sweep(): Promise<number> {
    return this.sweeper.sweep();
  }

  /**
   * Stops the sweeper, drops the LISTEN connection and, if the store owns the pool, ends it:
   * after 2 s without an answer (a frozen server) its connections are cut.
   */
  override close(): Promise<void> {
    return (this.closing ??= this.shutdown());
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    this.watchers.clear();
    this.listener.close();
    await this.connections.end();
  }
}
