import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Client, Pool, QueryResultRow } from 'pg';
import {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  TransactionalIdempotencyStore,
  WatchListener,
} from '../idempotency.store';
import {
  checkPostgresStoreOptions,
  type PostgresIdempotencyStoreOptions,
} from './postgres-options';
import { PostgresConnections } from './postgres-connections';
import { PostgresListener } from './postgres-listener';
import { PostgresSchema } from './postgres-schema';
import { DEFAULT_TABLE, statements, Statements } from './postgres-statements';
import { Sweeper } from '../sql/sweeper';
import { queryInTransaction, resultRows } from '../sql/transaction';
import { Watchers } from '../sql/watchers';

export { expiryIndexName, postgresSchemaSql } from './postgres-statements';
export type {
  IdempotencyPostgresConfig,
  PostgresIdempotencyStoreOptions,
} from './postgres-options';

/** A claim that finds neither its own row nor another's lost a rare race (see claim); retries. */
const CLAIM_ATTEMPTS = 5;

interface ClaimRow {
  claimed: boolean;
  marked: boolean;
  state: 'p' | 'c' | null;
  waiting: boolean | null;
  left_ms: number | null;
  mismatch: boolean | null;
  meta: string | null;
  body: Buffer | null;
}

interface InspectRow {
  state: 'p' | 'c';
  meta: string | null;
  bytes: number | null;
  left_ms: number;
  age_ms: number | null;
}

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
  private readonly sql: Statements;
  /** Statement names, so that each connection parses and plans each statement once. */
  private readonly names: Record<keyof Statements, string>;
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
    this.sql = statements(this.table);
    this.schema = new PostgresSchema(pool, this.table, this.logger);
    this.names = Object.fromEntries(
      Object.entries(this.sql).map(([name, text]) => [
        name,
        `idempotency_${name}_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`,
      ]),
    ) as Record<keyof Statements, string>;
    const connections = new PostgresConnections(pool, options.ownsPool === true);
    this.connections = connections;
    const track = (client: Client) => connections.track(client);
    this.listener = new PostgresListener(pool, this.channel, this.watchers, this.logger, track);
    this.sweeper = new Sweeper(
      async (batch) => (await this.run('sweep', [batch])).rowCount ?? 0,
      options.sweepBatchSize ?? 500,
      this.logger,
    );
    this.sweeper.every(options.sweepIntervalMs ?? 60_000, () => void this.sweep());
  }

  /**
   * One statement in the common case. In READ COMMITTED, the statement's snapshot may miss a
   * record a concurrent claim committed after it began: the INSERT then conflicts with it and
   * waits for it, but the SELECT cannot see it. Neither claimed nor seen: claim again (a new
   * statement, a new snapshot). The same holds for a waiter whose record completed or was
   * released under its snapshot (the mark found no pending row to mark).
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const { token, fingerprint, leaseMs, waiting = false } = request;
    for (let attempt = 1; ; attempt++) {
      const [row] = await this.query<ClaimRow>('claim', [
        key,
        token,
        fingerprint,
        leaseMs,
        waiting,
      ]);
      if (row.claimed) return { status: 'claimed' };
      if (row.mismatch) return { status: 'key_reused' };
      if (row.state === 'c') {
        const response = { meta: row.meta ?? '', body: row.body ?? Buffer.alloc(0) };
        return { status: 'completed', response };
      }
      const raced = row.state === null || (waiting && !row.waiting && !row.marked);
      if (!raced) {
        return { status: 'in_progress', retryAfterMs: Math.max(Math.floor(row.left_ms!), 0) };
      }
      if (attempt === CLAIM_ATTEMPTS) {
        throw new Error(`PostgresIdempotencyStore: the record ${key} kept changing under claim`);
      }
    }
  }

  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
  ): Promise<boolean> {
    const values = [key, token, response.meta, response.body, ttlMs, this.channel];
    const [row] = await this.query<{ n: number }>('complete', values);
    return row.n === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    const [row] = await this.query<{ n: number }>('release', [key, token, this.channel]);
    return row.n === 1;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const result = await this.run('extend', [key, token, leaseMs]);
    return result.rowCount === 1;
  }

  override async inspect(key: string): Promise<RecordInspection> {
    const [row] = await this.query<InspectRow>('inspect', [key]);
    if (!row) return { state: 'absent' };
    const ttlMsLeft = Math.max(Math.floor(row.left_ms), 0);
    if (row.state === 'p') return { state: 'pending', leaseMsLeft: ttlMsLeft };
    return {
      state: 'completed',
      meta: row.meta ?? '',
      bytes: row.bytes ?? 0,
      ageMs: Math.max(Math.floor(row.age_ms ?? 0), 0),
      ttlMsLeft,
    };
  }

  override async delete(key: string): Promise<boolean> {
    const [row] = await this.query<{ n: number }>('delete', [key, this.channel]);
    return row.n === 1;
  }

  /**
   * Writes the completion through `tx`, the app's open transaction, as its `TransactionHost`
   * exposes it: a TypeORM `EntityManager` or `QueryRunner`, a node-postgres client (after BEGIN),
   * a Knex, Kysely or Drizzle transaction or a Prisma interactive-transaction client. It commits
   * with the transaction, and waiters are notified at that commit. Never rolls back itself.
   * @returns false when `token` no longer owns the pending record: roll the transaction back.
   */
  async completeInTransaction(
    tx: unknown,
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
  ): Promise<boolean> {
    const values = [key, token, response.meta, response.body, ttlMs, this.channel];
    const result = await queryInTransaction(tx, this.sql.complete, values, '$n');
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
   * Deletes expired rows in batches of `sweepBatchSize` until a batch comes back short. Runs on
   * the interval; never two at once. @returns the rows deleted.
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

  /** Runs a statement of the store as a prepared statement of its connection. */
  private async run(name: keyof Statements, values: unknown[]) {
    if (this.options.ensureSchema) await this.schema.ensure();
    try {
      return await this.pool.query({ name: this.names[name], text: this.sql[name], values });
    } catch (error) {
      // 42P01 undefined_table, 3F000 invalid_schema_name: a missing migration, not an outage.
      const code = (error as { code?: string }).code;
      if (code === '42P01' || code === '3F000') {
        throw new Error(this.schema.missing(code === '42P01'), { cause: error });
      }
      throw error;
    }
  }

  private async query<T extends QueryResultRow>(
    name: keyof Statements,
    values: unknown[],
  ): Promise<T[]> {
    return (await this.run(name, values)).rows as T[];
  }
}
