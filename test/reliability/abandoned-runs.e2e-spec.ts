import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import {
  type IdempotencyModuleOptions,
  type IdempotencyRecordListItem,
  IdempotencyRecords,
  type IdempotencyStore,
} from '../../lib';
import { resolveModuleOptions } from '../../lib/options';
import { createStore } from '../../lib/stores/create-store';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';
import { AppProcess, buildLibrary } from './app-process';

/**
 * Half-done runs made the honest way, heard once across three app processes sharing a store: a
 * resumable handler whose third step throws, and one whose process is SIGKILLed in its third
 * step (after two). Each is listed half done with its key, owner and two steps; each is reported
 * abandoned by exactly one process (one `abandoned` event, one log line), however many looks the
 * three take; the retry of either resumes it (its first two steps do not run again). On Redis,
 * PostgreSQL and MariaDB.
 */
const ABANDONED_AFTER = 1_000;
/** The lease: short, so that the killed process's claim runs out quickly. */
const LOCK_TTL = 500;

/** A store the three processes share: how they select it, and how the test cleans it up. */
interface SharedStore {
  name: string;
  env: () => Record<string, string>;
  /** The module options of the same store, for the test's own IdempotencyRecords. */
  options: () => IdempotencyModuleOptions;
  cleanUp(): Promise<void>;
}

const redisPrefix = uniquePrefix('abandoned-runs');
const postgresTable = uniqueTable('abandoned_runs');
const mysqlTable = uniqueMysqlTable('abandoned_runs');
const STORES: SharedStore[] = [
  {
    name: 'Redis',
    env: () => ({ STORE: 'redis', REDIS_URL: testRedisUrl(), KEY_PREFIX: redisPrefix }),
    options: () => ({ redis: testRedisUrl(), keyPrefix: redisPrefix }),
    async cleanUp() {
      const redis: Redis = inspectionClient();
      await deleteKeysUnder(redis, redisPrefix);
      await redis.quit();
    },
  },
  {
    name: 'PostgreSQL',
    env: () => ({
      STORE: 'postgres',
      POSTGRES_URL: testPostgresUrl(),
      RECORDS_TABLE: postgresTable,
    }),
    options: () => ({ postgres: { connectionString: testPostgresUrl(), table: postgresTable } }),
    async cleanUp() {
      const pool = await testPool();
      await dropTable(pool, postgresTable);
      await pool.end();
    },
  },
  {
    name: 'MariaDB',
    env: () => ({ STORE: 'mysql', MYSQL_URL: testMysqlUrl(), RECORDS_TABLE: mysqlTable }),
    options: () => ({ mysql: { connectionString: testMysqlUrl(), table: mysqlTable } }),
    async cleanUp() {
      const pool = await testMysqlPool();
      await dropMysqlTable(pool, mysqlTable);
      await pool.end();
    },
  },
];

beforeAll(() => buildLibrary(), 120_000);

describe.each(STORES)('abandoned runs across three processes sharing $name', (shared) => {
  const apps: AppProcess[] = [];
  let store: IdempotencyStore | undefined;
  let records: IdempotencyRecords;

  const start = async () => {
    const app = await AppProcess.start(
      {
        ...shared.env(),
        ABANDONED_AFTER: String(ABANDONED_AFTER),
        LOCK_TTL: String(LOCK_TTL),
      },
      'abandoned-process.js',
    );
    apps.push(app);
    return app;
  };
  const order = (app: AppProcess, key: string, headers: Record<string, string> = {}) =>
    post(app.url, '/orders', {
      key,
      body: { item: 'book' },
      headers: { 'x-user': 'ann', ...headers },
    });
  /** Every process's lines starting with `word`, the killed one's included. */
  const reports = (word: string) => apps.flatMap((app) => app.reports(word));
  const abandoned = () =>
    reports('ABANDONED').map((line) => JSON.parse(line) as IdempotencyRecordListItem);

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop('SIGKILL')));
    await store?.close();
    await shared.cleanUp();
  });

  it('lists them, hears each once, and their retries resume them', async () => {
    const [first, second] = [await start(), await start(), await start()];
    // Made once the first process has the store ready (a SQL table made with ensureSchema).
    const options = resolveModuleOptions(shared.options());
    store = createStore(options);
    records = new IdempotencyRecords(store, options);
    const failed = `failed-${randomUUID()}`;
    const killed = `killed-${randomUUID()}`;

    // A step that throws: the claim is released with two steps recorded.
    expect((await order(first, failed, { 'x-fail': 'email' })).status).toBe(502);
    // A process SIGKILLed in its third step: its lease runs out with two steps recorded.
    const dying = order(second, killed, { 'x-hold': 'email' }).catch(() => undefined);
    await second.waitForLine(new RegExp(`^HOLDING ${killed}$`));
    await second.stop('SIGKILL');
    await dying;
    const third = await start(); // three processes again

    const steps = [
      { index: 0, name: 'order' },
      { index: 1, name: 'charge' },
    ];
    // Listed half done once the killed run's lease has run out, each with its key and owner.
    let listed: IdempotencyRecordListItem[] = [];
    for (let tries = 0; listed.length < 2; tries++) {
      if (tries > 100) throw new Error(`still listed: ${JSON.stringify(listed)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      listed = (await records.list({ state: 'half_done', route: 'POST /orders' })).items;
    }
    expect(listed.map(({ key, user, steps }) => ({ key, user, steps }))).toEqual(
      expect.arrayContaining([
        { key: failed, user: { id: 'ann' }, steps },
        { key: killed, user: { id: 'ann' }, steps },
      ]),
    );

    // Heard: once each, whichever process wins; more looks by all three report nothing more.
    await Promise.all(
      [failed, killed].map((key) =>
        Promise.race(apps.map((app) => app.waitForLine(new RegExp(`^ABANDONED .*"key":"${key}"`)))),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 3 * ABANDONED_AFTER));
    expect(abandoned().map(({ key, route, user, steps }) => ({ key, route, user, steps }))).toEqual(
      expect.arrayContaining([
        { key: failed, route: 'POST /orders', user: { id: 'ann' }, steps },
        { key: killed, route: 'POST /orders', user: { id: 'ann' }, steps },
      ]),
    );
    expect(abandoned()).toHaveLength(2);
    const lines = reports('WARN').filter((line) => line.startsWith('abandoned: '));
    expect(lines).toHaveLength(2);
    for (const key of [failed, killed]) {
      expect(lines).toContainEqual(
        expect.stringContaining(
          `abandoned: POST /orders, key "${key}", user "ann", steps done: order, charge;`,
        ),
      );
    }

    // Resumed by their retries, on any process: order and charge do not run again.
    for (const key of [failed, killed]) {
      const resumed = await order(third, key);
      expect(resumed.status).toBe(201);
      expect(reports('RAN').filter((line) => line.startsWith(`${key} `))).toEqual([
        `${key} order`,
        `${key} charge`,
        `${key} email`,
        `${key} email`,
      ]);
    }
    expect((await records.list({ state: 'half_done' })).items).toEqual([]);
    expect((await records.counts()).completed).toBe(2);
  }, 60_000);
});
