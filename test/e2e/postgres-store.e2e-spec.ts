import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool, type PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { PostgresIdempotencyStore, type StoredResponse } from '../../lib';
import { packageFolder } from '../../lib/utils/load-optional';
import { checkStoreOptions } from '../../lib/stores/create-store';
import {
  dropTable,
  testPool,
  testPostgresAddress,
  testPostgresUrl,
  testPostgresUrlAt,
  uniqueTable,
} from '../support/postgres';
import { findFreePort } from '../support/redis-server';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { PLATFORMS, post, startTestApp, type TestApp } from '../support/test-app';

/** Lets `ms` of real time pass: leases run on the database's clock, which no test can fake. */
const elapse = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A store call raced against `ms`, as the interceptor races every call against storeTimeout. */
function bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`store call timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A watch listener that counts its calls, and a bounded wait for the next one. */
function signal() {
  let count = 0;
  let waiters: (() => void)[] = [];
  return {
    fire: () => {
      count++;
      waiters.forEach((wake) => wake());
      waiters = [];
    },
    get count() {
      return count;
    },
    /** Resolves on the next call after this one (or at once if `count` is already past `seen`). */
    next(seen = count, ms = 5_000): Promise<void> {
      if (count > seen) return Promise.resolve();
      return bounded(new Promise<void>((resolve) => waiters.push(resolve)), ms);
    },
  };
}

/** Polls `check` every 10 ms for a state no event announces (a lock wait), for at most 5 s. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + 5_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await elapse(10);
  }
}

const claim = (token: string, fingerprint = 'fp', leaseMs = 60_000, waiting = false) => ({
  token,
  fingerprint,
  leaseMs,
  waiting,
});
const stored = (text: string): StoredResponse => ({
  meta: JSON.stringify({ s: 201, k: 'j' }),
  body: Buffer.from(text),
});
const newKey = () => `idempotency:{${randomBytes(16).toString('base64url')}}`;

let pool: Pool;
const tables: string[] = [];
/** A table of this suite's own, dropped at the end. */
const table = (name: string) => {
  const created = uniqueTable(name);
  tables.push(created);
  return created;
};
const stores: PostgresIdempotencyStore[] = [];
/** A store on `on` (the suite's pool by default), closed at the end; no sweeper unless asked. */
const storeOn = (
  name: string,
  options: ConstructorParameters<typeof PostgresIdempotencyStore>[1] = {},
  on = pool,
) => {
  const store = new PostgresIdempotencyStore(on, {
    table: table(name),
    ensureSchema: true,
    sweepIntervalMs: 0,
    ...options,
  });
  stores.push(store);
  return store;
};
/** The row of `key`: its physical version (ctid, xmin, xmax) and fields. */
const row = async (store: PostgresIdempotencyStore, key: string) =>
  (
    await pool.query(
      `SELECT ctid::text, xmin::text, xmax::text, state, waiting, owner FROM "${store.table}" WHERE key = $1`,
      [key],
    )
  ).rows[0] as
    | { ctid: string; xmin: string; xmax: string; state: string; waiting: boolean; owner: string }
    | undefined;

beforeAll(async () => {
  pool = await testPool({ max: 20 });
});
afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
  for (const name of tables) await dropTable(pool, name);
  await pool.end();
});

describe('PostgresIdempotencyStore: schema', () => {
  /** Columns, constraints and indexes of a table, its own name replaced by T. */
  async function definition(name: string) {
    const columns = await pool.query(
      `SELECT attname, format_type(atttypid, atttypmod) AS type, attnotnull,
         pg_get_expr(adbin, adrelid) AS default
       FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum
       WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
      [`"${name}"`],
    );
    const constraints = await pool.query(
      `SELECT replace(conname, $2, 'T') AS name, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint WHERE conrelid = $1::regclass ORDER BY conname`,
      [`"${name}"`, name],
    );
    const indexes = await pool.query(
      `SELECT replace(indexdef, $1, 'T') AS definition FROM pg_indexes WHERE tablename = $1
       ORDER BY indexname`,
      [name],
    );
    return { columns: columns.rows, constraints: constraints.rows, indexes: indexes.rows };
  }

  it('applies sql/postgres/001 and 003 cleanly (twice, renamed as their comments say) and ensureSchema creates the same table', async () => {
    const read = (file: string) =>
      readFileSync(join(packageFolder('sql'), 'postgres', file), 'utf8');
    const migrated = table('migrated');
    for (const file of ['001_idempotency_records.sql', '003_idempotency_listing.sql']) {
      await pool.query(read(file).replaceAll('idempotency_records', migrated));
      await pool.query(read(file).replaceAll('idempotency_records', migrated));
    }
    const ensured = storeOn('ensured');
    expect(await ensured.whenReady(5_000)).toBe(true);
    const expected = await definition(migrated);
    expect(expected.columns.map((column) => column.attname)).toEqual([
      'key',
      'state',
      'waiting',
      'fingerprint',
      'owner',
      'meta',
      'body',
      'completed_at',
      'expires_at',
      'route',
      'label',
      'claimed_at',
      'reported',
    ]);
    expect(expected.indexes).toEqual([
      {
        definition:
          'CREATE INDEX T_claimed_at_idx ON public.T USING btree (claimed_at) WHERE (state = \'p\'::"char")',
      },
      {
        definition:
          'CREATE INDEX T_completed_at_idx ON public.T USING btree (completed_at) WHERE (state = \'c\'::"char")',
      },
      { definition: 'CREATE INDEX T_expires_at_idx ON public.T USING btree (expires_at)' },
      { definition: 'CREATE UNIQUE INDEX T_pkey ON public.T USING btree (key)' },
    ]);
    expect(await definition(ensured.table)).toEqual(expected);

    // A store without ensureSchema works on the migrated table.
    const onMigrated = new PostgresIdempotencyStore(pool, { table: migrated, sweepIntervalMs: 0 });
    const key = newKey();
    expect(await onMigrated.claim(key, claim('a'))).toEqual({ status: 'claimed' });
    expect(await onMigrated.complete(key, 'a', stored('ok'), 60_000)).toBe(true);
    await onMigrated.close();
  });

  it('quotes a schema-qualified table and NOTIFYs on its channel', async () => {
    const schema = `idempotency_test_schema_${randomUUID().slice(0, 8)}`;
    await pool.query(`CREATE SCHEMA "${schema}"`);
    const store = new PostgresIdempotencyStore(pool, {
      table: `${schema}.Records`,
      ensureSchema: true,
      sweepIntervalMs: 0,
    });
    try {
      const key = newKey();
      await store.claim(key, claim('a'));
      const woke = signal();
      const unwatch = await store.watch(key, woke.fire);
      await store.claim(key, claim('b', 'fp', 60_000, true));
      await store.complete(key, 'a', stored('done'), 60_000);
      await woke.next(0);
      unwatch();
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}"."Records"`);
      expect(rows).toEqual([{ n: 1 }]);
    } finally {
      await store.close();
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    }
  });

  it('refuses table names that are not plain identifiers, and bad module options', () => {
    for (const name of ['x"; DROP TABLE y; --', 'a.b.c', '1abc', 'a b', '', 'x'.repeat(64)]) {
      expect(() => new PostgresIdempotencyStore(pool, { table: name })).toThrow(TypeError);
    }
    expect(() => new PostgresIdempotencyStore(pool, { sweepBatchSize: 0 })).toThrow(TypeError);
    expect(() =>
      checkStoreOptions({ redis: 'redis://127.0.0.1:6379', postgres: testPostgresUrl() }),
    ).toThrow('IdempotencyModule: redis and postgres are two stores: set one of them');
    expect(() => checkStoreOptions({ postgres: { table: 'bad name' } })).toThrow(
      /IdempotencyModule: postgres\.table must be a table name/,
    );
    expect(() => checkStoreOptions({ postgres: { connectionString: '', pool } })).toThrow(
      'IdempotencyModule: postgres takes connectionString or pool, not both',
    );
    expect(() => checkStoreOptions({ postgres: ' ' })).toThrow(/postgres must be/);
    expect(() => checkStoreOptions({ postgres: pool })).not.toThrow();
  });
});

describe('PostgresIdempotencyStore: the database clock', () => {
  it('counts leases and retention on the database clock, whatever the app clock and time zone', async () => {
    const zoned = await testPool({ options: '-c TimeZone=Pacific/Kiritimati' });
    const store = storeOn('clock', {}, zoned);
    await store.whenReady(5_000);
    // Twenty-five years back for the app; timers stay real.
    jest.useFakeTimers({
      now: new Date('2001-01-01T00:00:00Z'),
      doNotFake: [
        'setTimeout',
        'clearTimeout',
        'setInterval',
        'clearInterval',
        'setImmediate',
        'clearImmediate',
        'nextTick',
        'queueMicrotask',
        'hrtime',
        'performance',
      ],
    });
    try {
      const key = newKey();
      expect(await store.claim(key, claim('a', 'fp', 60_000))).toEqual({ status: 'claimed' });
      const second = await store.claim(key, claim('b'));
      expect(second.status === 'in_progress' && second.retryAfterMs).toBeGreaterThan(59_000);
      expect(second.status === 'in_progress' && second.retryAfterMs).toBeLessThanOrEqual(60_000);
      const { rows } = await pool.query(
        `SELECT extract(epoch FROM expires_at - now()) AS s FROM "${store.table}" WHERE key = $1`,
        [key],
      );
      expect(Number(rows[0].s)).toBeGreaterThan(59);
      expect(await store.complete(key, 'a', stored('short'), 300)).toBe(true);
      expect((await store.claim(key, claim('c'))).status).toBe('completed');
      await elapse(400);
      expect(await store.claim(key, claim('c'))).toEqual({ status: 'claimed' });
    } finally {
      jest.useRealTimers();
      await store.close();
      await zoned.end();
    }
  });
});

describe('PostgresIdempotencyStore: claims', () => {
  let store: PostgresIdempotencyStore;
  beforeAll(async () => {
    store = storeOn('claims');
    await store.whenReady(5_000);
  });

  it('writes nothing for a replay, a 409 or a 422: no row lock, no new row version', async () => {
    const key = newKey();
    await store.claim(key, claim('a', 'one'));
    const pending = await row(store, key);
    expect(pending).toMatchObject({ state: 'p', xmax: '0', waiting: false, owner: 'a' });
    expect((await store.claim(key, claim('b', 'one'))).status).toBe('in_progress');
    expect(await store.claim(key, claim('b', 'two'))).toEqual({ status: 'key_reused' });
    expect(await row(store, key)).toEqual(pending);

    await store.complete(key, 'a', stored('done'), 60_000);
    const completed = await row(store, key);
    expect(completed).toMatchObject({ state: 'c', xmax: '0', owner: null });
    expect((await store.claim(key, claim('c', 'one'))).status).toBe('completed');
    expect((await store.claim(key, claim('c', 'one', 60_000, true))).status).toBe('completed');
    expect(await store.claim(key, claim('c', 'two'))).toEqual({ status: 'key_reused' });
    expect(await row(store, key)).toEqual(completed);
  });

  it('marks a pending record for a waiter once, and never for a reused key', async () => {
    const key = newKey();
    await store.claim(key, claim('a', 'one'));
    await store.claim(key, claim('b', 'two', 60_000, true));
    expect(await row(store, key)).toMatchObject({ waiting: false });
    expect((await store.claim(key, claim('b', 'one', 60_000, true))).status).toBe('in_progress');
    const marked = await row(store, key);
    expect(marked).toMatchObject({ waiting: true, owner: 'a' });
    expect((await store.claim(key, claim('c', 'one', 60_000, true))).status).toBe('in_progress');
    expect(await row(store, key)).toEqual(marked);
  });

  it('answers 422 on a record with a 1 MiB body without reading the body', async () => {
    // One connection: its statistics are flushed on demand (PostgreSQL 15+) and read after.
    const single = await testPool({ max: 1 });
    const alone = new PostgresIdempotencyStore(single, { table: store.table, sweepIntervalMs: 0 });
    const toastBlocks = async () => {
      await single.query('SELECT pg_stat_force_next_flush()');
      await single.query('SELECT 1');
      const { rows } = await pool.query(
        `SELECT coalesce(toast_blks_read, 0) + coalesce(toast_blks_hit, 0) AS n
         FROM pg_statio_user_tables WHERE relid = $1::regclass`,
        [`"${store.table}"`],
      );
      return Number(rows[0].n);
    };
    try {
      const key = newKey();
      const body = randomBytes(1024 * 1024); // incompressible: stored out of line, in TOAST
      await alone.claim(key, claim('a', 'one'));
      await alone.complete(key, 'a', { meta: '{}', body }, 60_000);
      const before = await toastBlocks();
      expect(await alone.claim(key, claim('b', 'two'))).toEqual({ status: 'key_reused' });
      expect(await toastBlocks()).toBe(before);
      const replay = await alone.claim(key, claim('c', 'one'));
      expect(replay.status === 'completed' && replay.response.body.equals(body)).toBe(true);
      // The check can fail: a replay reads the body's TOAST blocks.
      expect(await toastBlocks()).toBeGreaterThan(before);
    } finally {
      await alone.close();
      await single.end();
    }
  });

  it('lets exactly one of 50 concurrent claims win, 40 times, retrying the READ COMMITTED race', async () => {
    const statements = jest.spyOn(pool, 'query');
    try {
      let claims = 0;
      for (let round = 0; round < 40; round++) {
        const key = newKey();
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => store.claim(key, claim(`t${i}`))),
        );
        claims += results.length;
        expect(results.filter((result) => result.status === 'claimed')).toHaveLength(1);
        expect(results.filter((result) => result.status === 'in_progress')).toHaveLength(49);
      }
      // Claims that met a concurrent insert outside their snapshot ran a second statement
      // (without that retry, about one in ten of them fails here).
      const retried = statements.mock.calls.length - claims;
      console.log(`postgres store: ${retried} of ${claims} concurrent claims were retried`);
    } finally {
      statements.mockRestore();
    }
  });
});

describe('PostgresIdempotencyStore: the sweeper', () => {
  /** Rows whose lease or retention ended a second ago, straight into the table. */
  const insertExpired = (store: PostgresIdempotencyStore, count: number, state = 'p') =>
    pool.query(
      `INSERT INTO "${store.table}" (key, state, fingerprint, owner, expires_at)
       SELECT 'expired-' || gen_random_uuid(), $2, '', 'gone', statement_timestamp() - interval '1 second'
       FROM generate_series(1, $1)`,
      [count, state],
    );
  const count = async (store: PostgresIdempotencyStore) =>
    (await pool.query(`SELECT count(*)::int AS n FROM "${store.table}"`)).rows[0].n as number;

  it('deletes expired rows in batches of sweepBatchSize and keeps live ones', async () => {
    const store = storeOn('sweep', { sweepBatchSize: 7 });
    await store.whenReady(5_000);
    await insertExpired(store, 20, 'p');
    await insertExpired(store, 10, 'c');
    for (let i = 0; i < 5; i++) await store.claim(newKey(), claim('live'));
    for (let i = 0; i < 5; i++) {
      const key = newKey();
      await store.claim(key, claim('done'));
      await store.complete(key, 'done', stored('kept'), 60_000);
    }
    const statements = jest.spyOn(pool, 'query');
    try {
      // One run at a time: a second call while one runs returns at once.
      const runs = await Promise.all([store.sweep(), store.sweep()]);
      expect(runs).toEqual([30, 0]);
      const sweeps = statements.mock.calls.filter(([query]) =>
        String((query as { name?: string }).name).startsWith('idempotency_sweep'),
      );
      expect(sweeps).toHaveLength(5); // 7 + 7 + 7 + 7 + 2
    } finally {
      statements.mockRestore();
    }
    expect(await count(store)).toBe(10);
  });

  it('sweeps on its interval, and stops at close', async () => {
    const store = storeOn('interval', { sweepIntervalMs: 50 });
    await store.whenReady(5_000);
    const sweep = store.sweep.bind(store);
    const swept = new Promise<number>((resolve) => {
      jest.spyOn(store, 'sweep').mockImplementation(async () => {
        const deleted = await sweep();
        if (deleted > 0) resolve(deleted);
        return deleted;
      });
    });
    await insertExpired(store, 3);
    expect(await bounded(swept, 5_000)).toBe(3);

    await store.close();
    await insertExpired(store, 2);
    expect(await sweep()).toBe(0);
    expect(await count(store)).toBe(2);
  });

  it('skips rows another transaction holds, without waiting for it', async () => {
    const store = storeOn('locked');
    await store.whenReady(5_000);
    await insertExpired(store, 2);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT key FROM "${store.table}" LIMIT 1 FOR UPDATE`);
      expect(await bounded(store.sweep(), 2_000)).toBe(1);
      await holder.query('ROLLBACK');
      expect(await store.sweep()).toBe(1);
    } finally {
      holder.release();
    }
  });
});

describe('PostgresIdempotencyStore: waiting through LISTEN/NOTIFY', () => {
  let store: PostgresIdempotencyStore;
  beforeAll(async () => {
    store = storeOn('listen');
    await store.whenReady(5_000);
  });
  /** Backends LISTENing for the store (the last query of an idle backend stays in view). */
  const listeners = async () =>
    (
      await pool.query(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = $1`,
        [`LISTEN "${store.table}"`],
      )
    ).rows.map((entry) => entry.pid as number);

  it('wakes a waiter on completion within milliseconds, and polls nothing meanwhile', async () => {
    const key = newKey();
    await store.claim(key, claim('a'));
    const woke = signal();
    const unwatch = await store.watch(key, woke.fire);
    expect((await store.claim(key, claim('b', 'fp', 60_000, true))).status).toBe('in_progress');
    const statements = jest.spyOn(pool, 'query');
    try {
      // A quiet window: a polling waiter would query here.
      await elapse(300);
      expect(statements).not.toHaveBeenCalled();
      const started = performance.now();
      await store.complete(key, 'a', stored('done'), 60_000);
      await woke.next(0);
      const latency = performance.now() - started;
      console.log(`postgres store: a waiter woke ${latency.toFixed(1)} ms after complete() began`);
      expect(latency).toBeLessThan(1_000);
      expect(statements).toHaveBeenCalledTimes(1); // the completion itself
    } finally {
      statements.mockRestore();
      unwatch();
    }
    expect((await store.claim(key, claim('b'))).status).toBe('completed');
  });

  it('wakes a waiter on release and on delete; an unwatched listener hears nothing', async () => {
    const key = newKey();
    await store.claim(key, claim('a'));
    const [woke, gone] = [signal(), signal()];
    const unwatch = await store.watch(key, woke.fire);
    const unwatchGone = await store.watch(key, gone.fire);
    unwatchGone();
    await store.claim(key, claim('b', 'fp', 60_000, true));
    expect(await store.release(key, 'a')).toBe(true);
    await woke.next(0);
    expect(await store.claim(key, claim('b'))).toEqual({ status: 'claimed' });
    expect(await store.delete(key)).toBe(true);
    await woke.next(1);
    unwatch();
    expect(gone.count).toBe(0);
  });

  it('holds one LISTEN connection per store, whatever the number of keys watched', async () => {
    const unwatches = await Promise.all(
      Array.from({ length: 25 }, () => store.watch(newKey(), () => {})),
    );
    expect(await listeners()).toHaveLength(1);
    unwatches.forEach((unwatch) => unwatch());
  });

  it('reopens LISTEN when its connection is lost, and wakes every watcher then', async () => {
    const [first, second] = [newKey(), newKey()];
    const [one, two] = [signal(), signal()];
    const unwatches = [await store.watch(first, one.fire), await store.watch(second, two.fire)];
    const [pid] = await listeners();
    await pool.query('SELECT pg_terminate_backend($1)', [pid]);
    // Notifications may have been missed while it was down: every watcher claims again.
    await Promise.all([one.next(0), two.next(0)]);
    expect(await listeners()).toHaveLength(1);
    expect(await listeners()).not.toContain(pid);
    // And it hears notifications again.
    await store.claim(first, claim('a'));
    await store.claim(first, claim('b', 'fp', 60_000, true));
    await store.complete(first, 'a', stored('done'), 60_000);
    await one.next(1);
    unwatches.forEach((unwatch) => unwatch());
  });

  it('refuses to watch once closed', async () => {
    const closed = storeOn('closed');
    await closed.close();
    await expect(closed.watch(newKey(), () => {})).rejects.toThrow('closed');
  });
});

describe('PostgresIdempotencyStore: completeInTransaction', () => {
  let store: PostgresIdempotencyStore;
  let payments: string;
  let dataSource: DataSource;
  beforeAll(async () => {
    store = storeOn('tx');
    await store.whenReady(5_000);
    payments = table('payments');
    await pool.query(`CREATE TABLE "${payments}" (key text PRIMARY KEY)`);
    dataSource = new DataSource({ type: 'postgres', url: testPostgresUrl() });
    await dataSource.initialize();
  });
  afterAll(async () => {
    await dataSource?.destroy();
  });

  const paid = async (key: string) =>
    (await pool.query(`SELECT 1 FROM "${payments}" WHERE key = $1`, [key])).rowCount === 1;
  /** A pooled client inside BEGIN, with the handler's business write done. */
  const begin = async (key: string): Promise<PoolClient> => {
    const client = await pool.connect();
    await client.query('BEGIN');
    await client.query(`INSERT INTO "${payments}" (key) VALUES ($1)`, [key]);
    return client;
  };
  /** Expires `token`'s lease on `key` (a real wait: the database's clock runs the lease). */
  const expiredClaim = async (key: string, token: string) => {
    await store.claim(key, claim(token, 'fp', 50));
    await elapse(100);
  };

  it('commits the record with the business row (node-postgres client); waiters hear of it at commit', async () => {
    const key = newKey();
    await store.claim(key, claim('a'));
    const woke = signal();
    const unwatch = await store.watch(key, woke.fire);
    await store.claim(key, claim('b', 'fp', 60_000, true));
    const client = await begin(key);
    try {
      expect(await store.completeInTransaction(client, key, 'a', stored('paid'), 60_000)).toBe(
        true,
      );
      // Until the commit, others see the claim in progress (without waiting on its lock).
      expect((await bounded(store.claim(key, claim('c')), 1_000)).status).toBe('in_progress');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await woke.next(0);
    unwatch();
    const replay = await store.claim(key, claim('c'));
    expect(replay.status === 'completed' && replay.response.body.toString()).toBe('paid');
    expect(await paid(key)).toBe(true);
  });

  it('rolls back with the transaction: the record stays pending and its owner may release it', async () => {
    const key = newKey();
    await store.claim(key, claim('a'));
    const client = await begin(key);
    try {
      expect(await store.completeInTransaction(client, key, 'a', stored('x'), 60_000)).toBe(true);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect((await store.claim(key, claim('b'))).status).toBe('in_progress');
    expect(await store.release(key, 'a')).toBe(true);
    expect(await paid(key)).toBe(false);
  });

  it('returns false for a zombie whose lease was taken over; its rollback drops its writes', async () => {
    const key = newKey();
    await expiredClaim(key, 'zombie');
    expect(await store.claim(key, claim('heir'))).toEqual({ status: 'claimed' });
    const client = await begin(key);
    try {
      expect(await store.completeInTransaction(client, key, 'zombie', stored('z'), 60_000)).toBe(
        false,
      );
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await paid(key)).toBe(false);
    expect(await store.complete(key, 'heir', stored('heir'), 60_000)).toBe(true);
  });

  it.each(['COMMIT', 'ROLLBACK'])(
    'completes an expired lease nobody took over; a takeover waits for the %s',
    async (end) => {
      const key = newKey();
      await expiredClaim(key, 'late');
      const client = await begin(key);
      let takeover: Promise<unknown> | undefined;
      try {
        expect(await store.completeInTransaction(client, key, 'late', stored('late'), 60_000)).toBe(
          true,
        );
        takeover = store.claim(key, claim('heir'));
        const holder = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        await until(
          async () =>
            (
              await pool.query(
                'SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
                [holder],
              )
            ).rowCount! > 0,
          'the takeover waits on the completion',
        );
        await client.query(end);
      } finally {
        client.release();
      }
      const result = (await takeover) as { status: string };
      expect(result.status).toBe(end === 'COMMIT' ? 'completed' : 'claimed');
      expect(await paid(key)).toBe(end === 'COMMIT');
    },
  );

  it('writes through a TypeORM EntityManager and QueryRunner; false when fenced', async () => {
    const key = newKey();
    await store.claim(key, claim('a'));
    await dataSource.transaction(async (manager) => {
      await manager.query(`INSERT INTO "${payments}" (key) VALUES ($1)`, [key]);
      expect(await store.completeInTransaction(manager, key, 'a', stored('orm'), 60_000)).toBe(
        true,
      );
    });
    expect(await paid(key)).toBe(true);
    expect((await store.claim(key, claim('b'))).status).toBe('completed');

    const zombie = newKey();
    await expiredClaim(zombie, 'zombie');
    await store.claim(zombie, claim('heir'));
    await expect(
      dataSource.transaction(async (manager) => {
        await manager.query(`INSERT INTO "${payments}" (key) VALUES ($1)`, [zombie]);
        const owned = await store.completeInTransaction(manager, zombie, 'zombie', stored('z'), 1);
        if (!owned) throw new Error('lease lost: roll back');
      }),
    ).rejects.toThrow('lease lost');
    expect(await paid(zombie)).toBe(false);

    const runnerKey = newKey();
    await store.claim(runnerKey, claim('a'));
    const runner = dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      expect(await store.completeInTransaction(runner, runnerKey, 'a', stored('qr'), 60_000)).toBe(
        true,
      );
      await runner.commitTransaction();
    } finally {
      await runner.release();
    }
    expect((await store.claim(runnerKey, claim('b'))).status).toBe('completed');
  });

  it('writes through Knex-style (raw, ? placeholders) and Prisma-style transactions', async () => {
    const client = await pool.connect();
    try {
      const knex = {
        raw: (sql: string, bindings: unknown[]) => {
          let n = 0;
          return client.query(
            sql.replace(/\?/g, () => `$${++n}`),
            bindings,
          );
        },
      };
      const prisma = {
        $queryRawUnsafe: async (sql: string, ...values: unknown[]) =>
          (await client.query(sql, values)).rows,
      };
      for (const tx of [knex, prisma]) {
        const key = newKey();
        await store.claim(key, claim('a'));
        await client.query('BEGIN');
        expect(await store.completeInTransaction(tx, key, 'a', stored('raw'), 60_000)).toBe(true);
        expect(await store.completeInTransaction(tx, key, 'a', stored('again'), 60_000)).toBe(
          false,
        );
        await client.query('COMMIT');
        const replay = await store.claim(key, claim('b'));
        expect(replay.status === 'completed' && replay.response.body.toString()).toBe('raw');
      }
    } finally {
      client.release();
    }
  });

  it('refuses what is not a transaction', async () => {
    const key = newKey();
    await store.claim(key, claim('a'));
    const idle = await pool.connect();
    try {
      await idle.query('SELECT 1');
      for (const tx of [pool, dataSource.manager, idle, {}, null, 'tx']) {
        await expect(
          store.completeInTransaction(tx, key, 'a', stored('x'), 60_000),
        ).rejects.toThrow(TypeError);
      }
    } finally {
      idle.release();
    }
    expect((await store.claim(key, claim('b'))).status).toBe('in_progress');
  });
});

describe('PostgresIdempotencyStore: a frozen server', () => {
  let proxy: TcpProxy;
  beforeEach(async () => {
    proxy = await startTcpProxy(testPostgresAddress());
  });
  afterEach(async () => {
    await proxy.close();
  });

  it('bounds a claim raced as the interceptor does, and closes without hanging', async () => {
    const through = new Pool({
      connectionString: testPostgresUrlAt(proxy.port),
      connectionTimeoutMillis: 500,
    });
    through.on('error', () => {});
    const name = table('frozen');
    const store = new PostgresIdempotencyStore(through, {
      table: name,
      ensureSchema: true,
      ownsPool: true,
      sweepIntervalMs: 0,
    });
    // A LISTEN connection, and an idle one that the next claim takes: its query will hang.
    await store.watch(newKey(), () => {});
    expect(await store.claim(newKey(), claim('a'))).toEqual({ status: 'claimed' });
    expect(through.idleCount).toBe(1);
    proxy.freeze();
    let started = performance.now();
    await expect(bounded(store.claim(newKey(), claim('b')), 300)).rejects.toThrow('timed out');
    expect(performance.now() - started).toBeLessThan(1_000);
    started = performance.now();
    await store.close();
    const closing = performance.now() - started;
    console.log(`postgres store: close() on a frozen server took ${closing.toFixed(0)} ms`);
    expect(closing).toBeLessThan(4_000);
  });
});

describe.each(PLATFORMS)('IdempotencyModule with postgres on %s', (platform) => {
  const records = table(`http_${platform}`);
  let t: TestApp;
  beforeAll(async () => {
    // The module's own pool, from a connection string; the table created at boot.
    t = await startTestApp(platform, {
      postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('replays the stored 201 with Idempotent-Replayed', async () => {
    const key = randomUUID();
    const first = await post(t.url, '/payments', { key, body: { amount: 1 } });
    expect(first.status).toBe(201);
    const again = await post(t.url, '/payments', { key, body: { amount: 1 } });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(t.executions.count('create')).toBe(1);
  });

  it('answers 409 while the first request runs and 422 for another payload', async () => {
    const key = randomUUID();
    const started = t.executions.nextStarted();
    const first = post(t.url, '/payments/slow', { key, body: {} });
    const release = await started;
    expect((await post(t.url, '/payments/slow', { key, body: {} })).status).toBe(409);
    expect((await post(t.url, '/payments/slow', { key, body: { other: 1 } })).status).toBe(422);
    release();
    expect((await first).status).toBe(201);
  });

  it('holds a waiting duplicate until the first completes, then replays it', async () => {
    const key = randomUUID();
    const runs = t.executions.count('wait');
    const started = t.executions.nextStarted();
    const first = post(t.url, '/payments/wait', { key, body: { hold: true } });
    const release = await started;
    const waiting = t.executions.waitFor('waiting');
    const duplicate = post(t.url, '/payments/wait', { key, body: { hold: true } });
    await waiting;
    release();
    const [a, b] = await Promise.all([first, duplicate]);
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.text).toBe(a.text);
    expect(t.executions.count('wait')).toBe(runs + 1);
  });

  it('boots without waiting on an unreachable database and answers 503 fast', async () => {
    const port = await findFreePort();
    let started = performance.now();
    const down = await startTestApp(platform, {
      postgres: testPostgresUrlAt(port),
      storeTimeout: 500,
    });
    try {
      expect(performance.now() - started).toBeLessThan(3_000);
      started = performance.now();
      expect((await post(down.url, '/payments', { key: randomUUID(), body: {} })).status).toBe(503);
      expect(performance.now() - started).toBeLessThan(1_500);
      expect((await post(down.url, '/payments', { body: {} })).status).toBe(201);
    } finally {
      started = performance.now();
      await down.close();
      expect(performance.now() - started).toBeLessThan(3_000);
    }
  });

  it('answers 503 within storeTimeout when the database freezes, and still shuts down', async () => {
    const proxy = await startTcpProxy(testPostgresAddress());
    try {
      const frozen = await startTestApp(platform, {
        postgres: { connectionString: testPostgresUrlAt(proxy.port), table: records },
        storeTimeout: 500,
      });
      try {
        expect((await post(frozen.url, '/payments', { key: randomUUID(), body: {} })).status).toBe(
          201,
        );
        proxy.freeze();
        const started = performance.now();
        const refused = await post(frozen.url, '/payments', { key: randomUUID(), body: {} });
        expect(refused.status).toBe(503);
        expect(performance.now() - started).toBeLessThan(1_500);
      } finally {
        const started = performance.now();
        await frozen.close();
        expect(performance.now() - started).toBeLessThan(4_000);
      }
    } finally {
      await proxy.close();
    }
  });
});

describe('PostgresIdempotencyStore: what a record costs', () => {
  it('measures the table’s growth per record for a 200 B response', async () => {
    const store = storeOn('cost');
    await store.whenReady(5_000);
    /** Bytes of the table, its TOAST and its indexes. */
    const size = async () => {
      const { rows } = await pool.query(
        `SELECT pg_total_relation_size($1::regclass) AS total,
           pg_indexes_size($1::regclass) AS indexes`,
        [`"${store.table}"`],
      );
      return { total: Number(rows[0].total), indexes: Number(rows[0].indexes) };
    };
    const meta = JSON.stringify({ k: 'j', s: 201, h: { location: '/payments/42' } });
    const body = Buffer.from(JSON.stringify({ id: 'pay_1', note: 'x'.repeat(200) }).slice(0, 200));
    expect(body.length).toBe(200);
    const records = 10_000;
    const empty = await size();
    // Claimed and completed through the store, 50 at a time, with keys and fingerprints shaped
    // as the interceptor makes them.
    for (let i = 0; i < records; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          const [key, token] = [newKey(), randomUUID()];
          const fingerprint = randomBytes(16).toString('base64url');
          await store.claim(key, { token, fingerprint, leaseMs: 30_000 });
          await store.complete(key, token, { meta, body }, 86_400_000);
        }),
      );
    }
    const filled = await size();
    // Compacted: without the claims' dead row versions and their index entries.
    await pool.query(`VACUUM FULL "${store.table}"`);
    const compacted = await size();
    const perRecord = (after: { total: number }) => (after.total - empty.total) / records;
    const indexShare = (after: { indexes: number }) => (after.indexes - empty.indexes) / records;
    console.log(
      `postgres store, per 200 B record: ${perRecord(filled).toFixed(0)} bytes as written ` +
        `(indexes ${indexShare(filled).toFixed(0)}), ${perRecord(compacted).toFixed(0)} ` +
        `compacted (indexes ${indexShare(compacted).toFixed(0)})`,
    );
    expect(perRecord(filled)).toBeLessThan(1_000);
    expect(perRecord(compacted)).toBeLessThanOrEqual(perRecord(filled));
  }, 180_000);
});
