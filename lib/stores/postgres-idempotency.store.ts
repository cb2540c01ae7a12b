import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Client, Notification, Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg';
import {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  TransactionalIdempotencyStore,
  WatchListener,
} from './idempotency.store';
import { checkPostgresStoreOptions } from './postgres-options';

/** Options of {@link PostgresIdempotencyStore}. */
export interface PostgresIdempotencyStoreOptions {
  /**
   * The records' table, optionally schema-qualified (`'billing.idempotency_records'`): letters,
   * digits and `_`, at most 63 characters in all (it also names the NOTIFY channel). It is quoted
   * as given, so case counts. Default: `'idempotency_records'` (see `sql/` in the package).
   */
  table?: string;
  /**
   * Create the table and its index when they are missing (`CREATE ... IF NOT EXISTS`, the
   * statements of `sql/001_idempotency_records.sql` for this table): at boot, or on first use
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
   * Whether {@link PostgresIdempotencyStore.close} ends the pool. Default false: a pool you pass
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

/** A transaction {@link PostgresIdempotencyStore.completeInTransaction} can write through. */
type Transaction =
  /** Prisma's interactive transaction client. */
  | { $queryRawUnsafe(sql: string, ...values: unknown[]): Promise<unknown> }
  /** A Knex transaction (`?` placeholders). */
  | { raw(sql: string, bindings: unknown[]): PromiseLike<unknown> }
  /** A TypeORM EntityManager or QueryRunner, a node-postgres client. */
  | { query(sql: string, values: unknown[]): Promise<unknown> };

const DEFAULT_TABLE = 'idempotency_records';
/** A claim that finds neither its own row nor another's lost a rare race (see claim); retries. */
const CLAIM_ATTEMPTS = 5;
/** How long close() waits for the pool to end before it cuts the connections, in ms. */
const CLOSE_TIMEOUT_MS = 2_000;
/** Delay before the LISTEN connection is opened again after it failed, in ms. */
const RELISTEN_DELAY_MS = 1_000;

/** What a notification's first character says happened to the record named by the rest. */
const enum Outcome {
  Completed = 'c',
  Released = 'r',
  Deleted = 'd',
}

/** `name` as a quoted identifier, each part of a qualified name quoted on its own. */
function quote(name: string): string {
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}

/** `statement_timestamp() + $n milliseconds`: the database's clock, never the app's. */
const inMs = (param: string) =>
  `statement_timestamp() + ${param}::float8 * interval '1 millisecond'`;
/** Milliseconds from the statement's time to `column` (negative when it is past). */
const msUntil = (column: string) =>
  `(extract(epoch FROM ${column} - statement_timestamp()) * 1000)::float8`;

/** The statements of the store for one table; `$n` are bound in the order the methods pass them. */
function statements(table: string) {
  const t = quote(table);
  return {
    /**
     * Input: $1 key, $2 owner token, $3 fingerprint ('' = not compared), $4 lease ms,
     * $5 the caller waits (mark the pending record so that its outcome is notified).
     * Output: one row: `claimed`, `marked`, and the live record the statement's snapshot saw
     * (`state` NULL when none); `meta` and `body` only for a replay, so that a 409 or 422 never
     * reads (or detoasts) a stored body.
     *
     * The INSERT only runs when the snapshot has no live record, so a replay, a 409 or a 422
     * writes nothing (no row lock, no dead tuple, no WAL). ON CONFLICT takes over an expired
     * record, pending or completed, under its row lock: a completion in flight for it (its
     * owner's, maybe inside the app's transaction) commits first or not at all.
     */
    claim: `WITH inserted AS (
  INSERT INTO ${t} AS r (key, state, fingerprint, owner, expires_at)
  SELECT $1::text, 'p', $3::text, $2::text, ${inMs('$4')}
  WHERE NOT EXISTS (SELECT FROM ${t} WHERE key = $1 AND expires_at > statement_timestamp())
  ON CONFLICT (key) DO UPDATE
    SET state = 'p', fingerprint = excluded.fingerprint, owner = excluded.owner, waiting = false,
      meta = NULL, body = NULL, completed_at = NULL, expires_at = excluded.expires_at
    WHERE r.expires_at <= statement_timestamp()
  RETURNING 1
), marked AS (
  UPDATE ${t} SET waiting = true
  WHERE $5::boolean AND key = $1 AND state = 'p' AND NOT waiting
    AND expires_at > statement_timestamp() AND ($3 = '' OR fingerprint IN ('', $3))
  RETURNING 1
)
SELECT EXISTS (SELECT FROM inserted) AS claimed, EXISTS (SELECT FROM marked) AS marked,
  r.state, r.waiting, ${msUntil('r.expires_at')} AS left_ms,
  $3 <> '' AND r.fingerprint <> '' AND r.fingerprint <> $3 AS mismatch,
  CASE WHEN r.state = 'c' AND ($3 = '' OR r.fingerprint IN ('', $3)) THEN r.meta END AS meta,
  CASE WHEN r.state = 'c' AND ($3 = '' OR r.fingerprint IN ('', $3)) THEN r.body END AS body
FROM (SELECT) AS one
LEFT JOIN ${t} r ON r.key = $1 AND r.expires_at > statement_timestamp()`,

    /**
     * Input: $1 key, $2 owner token, $3 meta, $4 body, $5 retention ms, $6 channel.
     * Output: `n` 1 stored, 0 not the owner. Fenced by the token only: an expired record nobody
     * took over is still its owner's (a takeover is serialised with this by the row lock).
     * A waited-on record notifies 'c' + key; the body never goes in a notification (8000 bytes
     * at most): waiters claim to replay it. Inside a transaction the NOTIFY leaves at commit.
     * A SELECT over the CTE, so that every driver returns the row (TypeORM does not for UPDATE).
     */
    complete: `WITH done AS (
  UPDATE ${t} SET state = 'c', owner = NULL, meta = $3, body = $4,
    completed_at = statement_timestamp(), expires_at = ${inMs('$5')}
  WHERE key = $1 AND state = 'p' AND owner = $2
  RETURNING waiting
)
SELECT count(*)::int AS n,
  count(pg_notify($6, '${Outcome.Completed}' || $1)) FILTER (WHERE waiting) AS notified
FROM done`,

    /** Input: $1 key, $2 owner token, $3 channel. Output: `n` 1 released, 0 not the owner. */
    release: `WITH gone AS (
  DELETE FROM ${t} WHERE key = $1 AND state = 'p' AND owner = $2 RETURNING waiting
)
SELECT count(*)::int AS n,
  count(pg_notify($3, '${Outcome.Released}' || $1)) FILTER (WHERE waiting) AS notified
FROM gone`,

    /** Input: $1 key, $2 owner token, $3 lease ms. Affects 1 row when extended. */
    extend: `UPDATE ${t} SET expires_at = ${inMs('$3')}
WHERE key = $1 AND state = 'p' AND owner = $2`,

    /** Input: $1 key. Output: the live record, if any; never its body. */
    inspect: `SELECT state, meta, octet_length(body) AS bytes, ${msUntil('expires_at')} AS left_ms,
  (extract(epoch FROM statement_timestamp() - completed_at) * 1000)::float8 AS age_ms
FROM ${t} WHERE key = $1 AND expires_at > statement_timestamp()`,

    /** Input: $1 key, $2 channel. Output: `n` 1 when a live record was deleted. */
    delete: `WITH gone AS (
  DELETE FROM ${t} WHERE key = $1 RETURNING expires_at > statement_timestamp() AS live
)
SELECT (count(*) FILTER (WHERE live))::int AS n,
  count(pg_notify($2, '${Outcome.Deleted}' || $1)) AS notified
FROM gone`,

    /**
     * Input: $1 batch size. Deletes up to that many expired rows; rows another transaction holds
     * (a takeover, a completion in flight) are skipped, so sweepers of several instances and the
     * request path never wait on each other.
     */
    sweep: `DELETE FROM ${t} WHERE ctid = ANY (ARRAY (
  SELECT ctid FROM ${t} WHERE expires_at <= statement_timestamp()
  LIMIT $1 FOR UPDATE SKIP LOCKED
))`,
  };
}

/**
 * The expiry index's name: `<table>_expires_at_idx`, or, when that is longer than PostgreSQL keeps
 * (63 bytes; it would cut the name short, to the table's own name when that is 63 long, and
 * `CREATE INDEX IF NOT EXISTS` would then skip it), the table's name cut to fit with a hash of
 * it: still unique to the table.
 */
export function expiryIndexName(table: string): string {
  const name = `${table}_expires_at_idx`;
  if (Buffer.byteLength(name) <= 63) return name;
  const hash = createHash('sha256').update(table).digest('hex').slice(0, 8);
  return `${table.slice(0, 63 - '_expires_at_idx'.length - 9)}_${hash}_expires_at_idx`;
}

/**
 * The DDL of `sql/001_idempotency_records.sql` for `table`, as one implicit transaction. The
 * advisory lock keeps app instances booting together from racing on `CREATE TABLE IF NOT EXISTS`
 * (which can fail with a duplicate key on pg_type when two run at once).
 */
export function postgresSchemaSql(table = DEFAULT_TABLE): string {
  const t = quote(table);
  const index = quote(expiryIndexName(table.split('.').pop()!));
  return `SELECT pg_advisory_xact_lock(hashtext('nestjs-idempotency ${table}'));
CREATE TABLE IF NOT EXISTS ${t} (
  key text PRIMARY KEY,
  state "char" NOT NULL CHECK (state IN ('p', 'c')),
  waiting boolean NOT NULL DEFAULT false,
  fingerprint text NOT NULL,
  owner text,
  meta text,
  body bytea,
  completed_at timestamptz,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ${index} ON ${t} (expires_at);`;
}

type Statements = ReturnType<typeof statements>;

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
  /** The table, as configured. */
  readonly table: string;
  private readonly channel: string;
  private readonly sql: Statements;
  /** Statement names, so that each connection parses and plans each statement once. */
  private readonly names: Record<keyof Statements, string>;
  private readonly logger = new Logger('Idempotency');
  private readonly watchers = new Map<string, Set<WatchListener>>();
  /** The LISTEN connection, resolved once LISTEN is active; undefined while there is none. */
  private listening?: Promise<PoolClient>;
  /** The connection `listening` resolved to. */
  private listener?: PoolClient;
  private relisten?: NodeJS.Timeout;
  /** The schema, once created (ensureSchema). */
  private schema?: Promise<void>;
  private readonly sweeper?: NodeJS.Timeout;
  private sweeping = false;
  /**
   * Open connections close() waits for: every one of an owned pool, and the LISTEN connection.
   * It cuts those still open after {@link CLOSE_TIMEOUT_MS} (a frozen server).
   */
  private readonly clients = new Set<Client>();
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
    this.names = Object.fromEntries(
      Object.entries(this.sql).map(([name, text]) => [
        name,
        `idempotency_${name}_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`,
      ]),
    ) as Record<keyof Statements, string>;
    if (options.ownsPool) {
      pool.on('connect', (client) => this.track(client));
    }
    const interval = options.sweepIntervalMs ?? 60_000;
    if (interval > 0) {
      this.sweeper = setInterval(() => void this.sweep(), interval);
      this.sweeper.unref();
    }
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
   * Writes the completion through `tx`, the app's open transaction: a TypeORM `EntityManager` or
   * `QueryRunner`, a node-postgres client (after BEGIN), a Knex transaction or a Prisma
   * interactive-transaction client. It commits with the transaction, and waiters are notified at
   * that commit. Never rolls back itself.
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
    const [row] = await queryThrough(tx as Transaction, this.sql.complete, values);
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
    let listeners = this.watchers.get(key);
    if (!listeners) this.watchers.set(key, (listeners = new Set()));
    listeners.add(listener);
    const unwatch = () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.watchers.get(key) === listeners) this.watchers.delete(key);
    };
    try {
      await this.listen();
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
  async whenReady(timeoutMs: number): Promise<boolean> {
    const check = this.options.ensureSchema ? this.ensureSchema() : this.pool.query('SELECT 1');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([check.then(() => true), timeout]);
    } catch (error) {
      this.logger.warn(`PostgreSQL is not ready: ${describe(error)}`);
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Deletes expired rows in batches of `sweepBatchSize` until a batch comes back short. Runs on
   * the interval; never two at once. @returns the rows deleted.
   */
  async sweep(): Promise<number> {
    if (this.sweeping || this.closed) return 0;
    this.sweeping = true;
    let deleted = 0;
    try {
      const batch = this.options.sweepBatchSize ?? 500;
      for (;;) {
        const { rowCount } = await this.run('sweep', [batch]);
        deleted += rowCount ?? 0;
        if ((rowCount ?? 0) < batch || this.closed) return deleted;
      }
    } catch (error) {
      if (!this.closed) this.logger.error(`Deleting expired records failed: ${describe(error)}`);
      return deleted;
    } finally {
      this.sweeping = false;
    }
  }

  /**
   * Stops the sweeper, drops the LISTEN connection and, if the store owns the pool, ends it:
   * after {@link CLOSE_TIMEOUT_MS} without an answer (a frozen server) its connections are cut.
   */
  override close(): Promise<void> {
    return (this.closing ??= this.shutdown());
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    clearTimeout(this.relisten);
    this.watchers.clear();
    // One still opening is dropped by openListener, which checks `closed`.
    if (this.listener) dropClient(this.listener);
    this.listening = this.listener = undefined;
    const ended = this.options.ownsPool ? this.pool.end().catch(() => {}) : undefined;
    const open = [...this.clients].map(
      (client) => new Promise((resolve) => client.once('end', resolve)),
    );
    if ((await within(Promise.all([ended, ...open]), CLOSE_TIMEOUT_MS)) === 'timeout') {
      // A frozen server neither answers a query in flight nor acknowledges a goodbye, and
      // node-postgres waits for both: cut the sockets (their queries fail, the pool ends).
      this.clients.forEach((client) => client.connection.stream.destroy());
      await within(Promise.all([ended]), CLOSE_TIMEOUT_MS);
    }
  }

  /** Keeps `client` in {@link clients} until its connection ends. */
  private track(client: Client): void {
    this.clients.add(client);
    client.once('end', () => this.clients.delete(client));
  }

  /** Creates the table and index once (ensureSchema); a failure is retried on the next call. */
  private ensureSchema(): Promise<void> {
    return (this.schema ??= this.pool.query(postgresSchemaSql(this.table)).then(
      () => undefined,
      (error: unknown) => {
        this.schema = undefined;
        throw error;
      },
    ));
  }

  /** Runs a statement of the store as a prepared statement of its connection. */
  private async run(name: keyof Statements, values: unknown[]) {
    if (this.options.ensureSchema) await this.ensureSchema();
    return this.pool.query({ name: this.names[name], text: this.sql[name], values });
  }

  private async query<T extends QueryResultRow>(
    name: keyof Statements,
    values: unknown[],
  ): Promise<T[]> {
    return (await this.run(name, values)).rows as T[];
  }

  /** The LISTEN connection, opened on first use; shared by every watch. */
  private listen(): Promise<PoolClient> {
    return (this.listening ??= this.openListener().catch((error: unknown) => {
      this.listening = undefined;
      throw error;
    }));
  }

  private async openListener(): Promise<PoolClient> {
    const client = await this.pool.connect();
    // Without an 'error' listener a lost connection would crash the process.
    client.on('error', (error) => this.lostListener(client, error));
    client.on('notification', (message) => this.dispatch(message));
    this.track(client);
    try {
      // One identifier, dot included: pg_notify() names the channel by the same string.
      await client.query(`LISTEN "${this.channel}"`);
    } catch (error) {
      dropClient(client);
      throw error;
    }
    if (this.closed) {
      dropClient(client);
      throw new Error('the idempotency store is closed');
    }
    return (this.listener = client);
  }

  private dispatch(message: Notification): void {
    if (message.channel !== this.channel || !message.payload) return;
    // The first character is the outcome (Outcome); waiters claim again whatever it is.
    this.watchers.get(message.payload.slice(1))?.forEach((listener) => listener());
  }

  /**
   * The LISTEN connection failed: notifications sent until it is back are lost, so once it is,
   * every watcher is woken to claim again (as after a notification).
   */
  private lostListener(client: PoolClient, error: Error): void {
    dropClient(client);
    // A connection that failed while opening: its watch() call reports the error.
    if (this.listener !== client) return;
    this.listening = this.listener = undefined;
    if (this.closed) return;
    this.logger.warn(`PostgreSQL LISTEN connection lost (${error.message}); reopening it`);
    const reopen = () => {
      if (this.closed || this.watchers.size === 0) return;
      this.listen().then(
        () => this.watchers.forEach((listeners) => listeners.forEach((listener) => listener())),
        () => {
          this.relisten = setTimeout(reopen, RELISTEN_DELAY_MS);
          this.relisten.unref();
        },
      );
    };
    this.relisten = setTimeout(reopen, RELISTEN_DELAY_MS);
    this.relisten.unref();
  }
}

/** `promise`, or 'timeout' after `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Gives a client back to its pool to be destroyed (once; a second release would throw). */
function dropClient(client: PoolClient): void {
  const dropped = client as PoolClient & { idempotencyDropped?: boolean };
  if (dropped.idempotencyDropped) return;
  dropped.idempotencyDropped = true;
  client.release(true);
}

/**
 * Runs `sql` ($n placeholders) through a transaction handle and returns its rows: TypeORM's
 * `query()` returns the rows of a SELECT, node-postgres `{ rows }`, Knex (pg) `{ rows }`.
 */
async function queryThrough(tx: Transaction, sql: string, values: unknown[]): Promise<unknown[]> {
  let result: unknown;
  if (tx && typeof (tx as { $queryRawUnsafe?: unknown }).$queryRawUnsafe === 'function') {
    const prisma = tx as { $queryRawUnsafe(sql: string, ...values: unknown[]): Promise<unknown> };
    result = await prisma.$queryRawUnsafe(sql, ...values);
  } else if (tx && typeof (tx as { raw?: unknown }).raw === 'function') {
    // Knex binds `?` in order: one binding per placeholder, so $1 used twice binds twice.
    const bindings: unknown[] = [];
    const text = sql.replace(/\$(\d+)/g, (_, n: string) => {
      bindings.push(values[Number(n) - 1]);
      return '?';
    });
    result = await (tx as { raw(sql: string, bindings: unknown[]): PromiseLike<unknown> }).raw(
      text,
      bindings,
    );
  } else if (tx && typeof (tx as { query?: unknown }).query === 'function') {
    assertInTransaction(tx);
    result = await (tx as { query(sql: string, values: unknown[]): Promise<unknown> }).query(
      sql,
      values,
    );
  } else {
    throw new TypeError(
      'completeInTransaction: tx must be a TypeORM EntityManager or QueryRunner, a node-postgres ' +
        `client, a Knex transaction or a Prisma transaction client, got ${describeValue(tx)}`,
    );
  }
  if (Array.isArray(result)) return result;
  const rows = (result as { rows?: unknown } | null)?.rows;
  if (Array.isArray(rows)) return rows;
  throw new TypeError(`completeInTransaction: unexpected query result ${describeValue(result)}`);
}

/**
 * Refuses handles that are plainly outside a transaction, where the completion would commit on
 * its own whatever becomes of the handler's writes: a pg Pool, a TypeORM manager without a
 * transaction, a node-postgres client that reports it is idle.
 */
function assertInTransaction(tx: object): void {
  const handle = tx as {
    totalCount?: unknown;
    getRepository?: unknown;
    queryRunner?: { isTransactionActive?: boolean };
    isTransactionActive?: boolean;
    getTransactionStatus?: () => string | undefined;
  };
  const pool = typeof handle.totalCount === 'number';
  const manager = typeof handle.getRepository === 'function' && !('isTransactionActive' in handle);
  const idle =
    pool ||
    handle.isTransactionActive === false ||
    (manager && !handle.queryRunner?.isTransactionActive) ||
    (typeof handle.getTransactionStatus === 'function' && handle.getTransactionStatus() === 'I');
  if (idle) {
    throw new TypeError(
      'completeInTransaction: tx is not inside a transaction (a pool, a manager without a ' +
        'transaction, or an idle client): the completion would commit on its own',
    );
  }
}

function describeValue(value: unknown): string {
  if (value === null || typeof value !== 'object') return String(value);
  return value.constructor?.name ?? 'an object';
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
