import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool } from 'mysql2/promise';
import { MysqlIdempotencyStore, type StoredResponse } from '../../lib';
import { packageFolder } from '../../lib/utils/load-optional';
import { checkStoreOptions } from '../../lib/stores/create-store';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { PLATFORMS, startTestApp, type TestApp } from '../support/test-app';
import { expectDuplicatesHeldThenReplayed } from '../support/wait-cases';

const stored = (text: string): StoredResponse => ({ meta: 'm', body: Buffer.from(text) });
const claim = (token: string, fingerprint = 'fp', leaseMs = 60_000, waiting = false) => ({
  token,
  fingerprint,
  leaseMs,
  waiting,
});

let pool: Pool;
const tables: string[] = [];
const storeOn = (
  name: string,
  options: Partial<ConstructorParameters<typeof MysqlIdempotencyStore>[1]> = {},
) => {
  const table = uniqueMysqlTable(name);
  tables.push(table);
  return new MysqlIdempotencyStore(pool, {
    table,
    ensureSchema: true,
    sweepIntervalMs: 0,
    ...options,
  });
};

beforeAll(async () => {
  pool = await testMysqlPool();
});
afterAll(async () => {
  for (const table of tables) await dropMysqlTable(pool, table);
  await pool.end();
});

describe('MysqlIdempotencyStore: schema and options', () => {
  const definition = async (table: string) => {
    const [rows] = await pool.query(`SHOW CREATE TABLE \`${table}\``);
    return (rows as Record<string, string>[])[0]['Create Table'].replaceAll(table, 'T');
  };

  it('applies sql/mysql/001 cleanly (twice, renamed), then 003, and ensureSchema creates the same table', async () => {
    const read = (file: string) => readFileSync(join(packageFolder('sql'), 'mysql', file), 'utf8');
    const migrated = uniqueMysqlTable('migrated');
    tables.push(migrated);
    const records = read('001_idempotency_records.sql').replaceAll('idempotency_records', migrated);
    await pool.query(records);
    await pool.query(records);
    await pool.query(
      read('003_idempotency_listing.sql').replaceAll('idempotency_records', migrated),
    );
    const ensured = storeOn('ensured');
    expect(await ensured.whenReady(5_000)).toBe(true);
    expect(await definition(ensured.table)).toBe(await definition(migrated));
    expect(await definition(migrated)).toMatch(/ENGINE=InnoDB/);
    expect(await definition(migrated)).toMatch(
      /KEY `state_completed_at_idx` \(`state`,`completed_at`\)/,
    );

    const onMigrated = new MysqlIdempotencyStore(pool, { table: migrated, sweepIntervalMs: 0 });
    const key = randomUUID();
    expect(await onMigrated.claim(key, claim('a'))).toEqual({ status: 'claimed' });
    expect(await onMigrated.complete(key, 'a', stored('ok'), 60_000)).toBe(true);
    await onMigrated.close();
    await ensured.close();
  });

  it('validates the mysql option at boot', () => {
    expect(() => checkStoreOptions({ mysql: ' ' })).toThrow(/mysql must be a connection string/);
    expect(() => checkStoreOptions({ mysql: { table: 'bad name', uri: 'mysql://x' } })).toThrow(
      /mysql\.table must be a table name/,
    );
    expect(() => checkStoreOptions({ mysql: { uri: 'mysql://x', pool } })).toThrow(
      /uri or pool, not both/,
    );
    expect(() => checkStoreOptions({ mysql: { uri: 'mysql://x', waitPollMaxMs: 5 } })).toThrow(
      /waitPollMaxMs must be/,
    );
    expect(() => checkStoreOptions({ mysql: testMysqlUrl(), postgres: 'postgres://x' })).toThrow(
      /set one of redis, postgres and mysql/,
    );
    expect(() => checkStoreOptions({ mysql: pool })).not.toThrow();
  });
});

describe('MysqlIdempotencyStore: the sweeper', () => {
  it('deletes expired records in batches and leaves live ones', async () => {
    const store = storeOn('sweep', { sweepBatchSize: 2 });
    for (let i = 0; i < 5; i++) {
      await store.claim(`expired-${i}`, claim('a'));
      await store.complete(`expired-${i}`, 'a', stored('gone'), 1);
    }
    await store.claim('live', claim('a'));
    const statements = jest.spyOn(store.pool, 'query');
    try {
      // The records above were kept 1 ms: the database clock is past them now.
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await store.sweep()).toBe(5);
      // 2 + 2 + 1: three batches, the last one short.
      expect(statements).toHaveBeenCalledTimes(3);
    } finally {
      statements.mockRestore();
    }
    expect(await store.inspect('live')).toMatchObject({ state: 'pending' });
    const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM \`${store.table}\``);
    expect(Number((rows as { n: number }[])[0].n)).toBe(1);
    await store.close();
  });
});

describe('MysqlIdempotencyStore: waiting without LISTEN/NOTIFY', () => {
  it('wakes a waiter in the same process at once', async () => {
    const store = storeOn('wake');
    const key = randomUUID();
    await store.claim(key, claim('a'));
    let woke!: () => void;
    const woken = new Promise<void>((resolve) => (woke = resolve));
    const unwatch = await store.watch(key, () => woke());
    const started = performance.now();
    await store.complete(key, 'a', stored('done'), 60_000);
    await woken;
    const latency = performance.now() - started;
    console.log(
      `mysql store, same process: a waiter woke ${latency.toFixed(1)} ms after complete() began`,
    );
    unwatch();
    expect(latency).toBeLessThan(1_000);
    await store.close();
  });

  it('wakes a waiter in another process at a backed-off poll: one statement per pause', async () => {
    const holder = storeOn('poll');
    const waiter = new MysqlIdempotencyStore(pool, { table: holder.table, sweepIntervalMs: 0 });
    const key = randomUUID();
    await holder.claim(key, claim('a'));
    const polls: number[] = [];
    const sixPolls = new Promise<void>((resolve) => {
      const query = waiter.pool.query.bind(waiter.pool);
      jest.spyOn(waiter.pool, 'query').mockImplementation(((...args: Parameters<typeof query>) => {
        polls.push(performance.now());
        if (polls.length === 6) resolve();
        return query(...args);
      }) as typeof query);
    });
    let woke!: () => void;
    const woken = new Promise<void>((resolve) => (woke = resolve));
    const begun = performance.now();
    const unwatch = await waiter.watch(key, () => woke());
    await sixPolls;
    // 25 + 50 + 100 + 200 + 400 + 800 ms: backing off, not hammering.
    const sixth = polls[5] - begun;
    expect(sixth).toBeGreaterThanOrEqual(1_500);
    const completed = performance.now();
    await holder.complete(key, 'a', stored('done'), 60_000);
    await woken;
    const latency = performance.now() - completed;
    console.log(
      `mysql store, other process: 6 polls in ${sixth.toFixed(0)} ms of waiting; ` +
        `the waiter woke ${latency.toFixed(0)} ms after the completion (pause then: 1000 ms)`,
    );
    expect(latency).toBeLessThan(1_500);
    unwatch();
    jest.restoreAllMocks();
    await waiter.close();
    await holder.close();
  });
});

describe.each(PLATFORMS)("onConflict: 'wait' on the MySQL store (%s)", (platform) => {
  let t: TestApp;
  const table = uniqueMysqlTable('wait_http');
  beforeAll(async () => {
    tables.push(table);
    t = await startTestApp(platform, {
      mysql: { uri: testMysqlUrl(), table, ensureSchema: true },
      scope: 'public',
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('holds duplicates until the first request completes, then replays its response to each', () =>
    expectDuplicatesHeldThenReplayed(t));
});
