import { connect as amqpConnect } from 'amqplib';
import { randomUUID } from 'node:crypto';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { requireBroker, RMQ_URL } from '../support/microservice-app';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { AppProcess, buildLibrary } from './app-process';
import { publishingOrder, unsettledOn, until } from './stream';

/**
 * A RabbitMQ manual-ack consumer whose handler writes a ledger row, SIGKILLed twice mid-stream
 * while the publisher sends duplicates, per store: with `transactional: true` the row commits with
 * the record, so no event is lost and none is written twice; on Redis, an event runs twice only
 * when its consumer died between the insert and storing the outcome (the crash window). A store
 * is one {@link StoreCase}: its `forRoot` options and its ledger; the MySQL store runs on MariaDB
 * with the ledger in the same database (TypeORM's mysql driver, mysql2).
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const MESSAGES = FULL ? 300 : 100;
const DUPLICATE_SHARE = 0.4;
const LOCK_TTL = 2_000;

interface StoreCase {
  name: string;
  /** `transactional: true`: no event may run twice. */
  transactional: boolean;
  /** The store options of `IdempotencyModule.forRoot` for this run. */
  store(): Promise<Record<string, unknown>>;
  /** TypeORM options of the database the ledger rows go to (the store's, when transactional). */
  ledger: DataSourceOptions;
  /** Fails naming the database when it is not there (in CI and locally alike). */
  requireDatabase(): Promise<void>;
  /** Drops what `store()` created. */
  cleanUp(): Promise<void>;
}

const records = uniqueTable('consumer_records');
const mysqlRecords = uniqueMysqlTable('consumer_records');
const redisPrefix = uniquePrefix('ledger-consumers');

const STORES: StoreCase[] = [
  {
    name: 'PostgreSQL store, transactional',
    transactional: true,
    store: async () => ({
      postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
    }),
    ledger: { type: 'postgres', url: testPostgresUrl() },
    requireDatabase: async () => (await testPool()).end(),
    cleanUp: async () => {
      const pool = await testPool();
      await pool.query(`DROP TABLE IF EXISTS "${records}"`);
      await pool.end();
    },
  },
  {
    name: 'Redis store',
    transactional: false,
    store: async () => ({ redis: testRedisUrl(), keyPrefix: redisPrefix }),
    ledger: { type: 'postgres', url: testPostgresUrl() },
    requireDatabase: async () => (await testPool()).end(),
    cleanUp: async () => {
      const redis = inspectionClient();
      await deleteKeysUnder(redis, redisPrefix);
      await redis.quit();
    },
  },
  {
    name: 'MySQL store on MariaDB, transactional',
    transactional: true,
    store: async () => ({
      mysql: { uri: testMysqlUrl(), table: mysqlRecords, ensureSchema: true },
    }),
    ledger: { type: 'mysql', url: testMysqlUrl() },
    requireDatabase: async () => (await testMysqlPool()).end(),
    cleanUp: async () => {
      const pool = await testMysqlPool();
      await dropMysqlTable(pool, mysqlRecords);
      await pool.end();
    },
  },
];

beforeAll(() => buildLibrary(), 120_000);

describe.each(STORES)('RabbitMQ ledger consumer killed mid-stream: $name', (store) => {
  const table = `idempotency_test_ledger_${randomUUID().slice(0, 8)}`;
  let ledger: DataSource;

  beforeAll(async () => {
    await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
    await store.requireDatabase();
    ledger = await new DataSource(store.ledger).initialize();
    await ledger.query(`CREATE TABLE ${table} (event_id varchar(64) NOT NULL)`);
  });
  afterAll(async () => {
    await ledger?.query(`DROP TABLE IF EXISTS ${table}`);
    await ledger?.destroy();
    await store.cleanUp();
  });

  /** Ledger rows per event id. */
  const rows = async () => {
    const counted: { event_id: string; n: string | number }[] = await ledger.query(
      `SELECT event_id, count(*) AS n FROM ${table} GROUP BY event_id`,
    );
    return new Map(counted.map((row) => [row.event_id, Number(row.n)]));
  };

  const outcome = store.transactional
    ? 'none lost, none written twice'
    : 'none lost, written twice only when killed mid-handler';
  it(`${MESSAGES} messages, 40% duplicates, two SIGKILLs: ${outcome}`, async () => {
    const queue = `idempotency-ledger-${randomUUID().slice(0, 8)}`;
    const env = {
      BROKER_URL: RMQ_URL,
      QUEUE: queue,
      STORE: JSON.stringify(await store.store()),
      TRANSACTIONAL: store.transactional ? '1' : '0',
      LEDGER_DB: JSON.stringify(store.ledger),
      LEDGER_TABLE: table,
      LOCK_TTL: String(LOCK_TTL),
    };
    const start = () => AppProcess.start(env, 'ledger-consumer-process.js');
    const connection = await amqpConnect(RMQ_URL);
    const channel = await connection.createChannel();
    const consumers: AppProcess[] = [];
    try {
      // Three consumers share the stream; two are killed in the middle of a handler (at an
      // EFFECT line: the insert is under way), while they hold prefetched deliveries.
      consumers.push(await start(), await start(), await start());
      const ids = publishingOrder(MESSAGES, DUPLICATE_SHARE);
      const unique = new Set(ids);
      for (const eventId of ids) {
        const message = { pattern: 'ledger.entry', data: { eventId } };
        channel.sendToQueue(queue, Buffer.from(JSON.stringify(message)));
      }
      const killed = consumers.slice(0, 2);
      for (const [victim, share] of [
        [killed[0], 0.1],
        [killed[1], 0.15],
      ] as const) {
        await victim.waitForReports('EFFECT', Math.ceil(unique.size * share));
        await victim.stop('SIGKILL');
      }
      const survivor = consumers[2];
      // Done: every id has its row, and the survivor settled every delivery it received.
      await until(async () => {
        const done = (await rows()).size;
        const delivered = survivor.reports('DELIVER').length;
        const settled = survivor.reports('ACK').length + survivor.reports('NACK').length;
        const { messageCount } = await channel.checkQueue(queue);
        return done === unique.size && delivered === settled && messageCount === 0;
      }, 60_000);
      const written = await rows();
      const lost = [...unique].filter((id) => !written.get(id));
      const twice = [...unique].filter((id) => written.get(id)! > 1);
      // The crash window: a killed consumer started the insert but never stored the outcome.
      const window = unsettledOn(killed, 'EFFECT');
      // Each kill came mid-stream: the victim held deliveries it had not settled.
      const unsettled = killed.map(
        (c) => c.reports('DELIVER').length - c.reports('SETTLED').length,
      );
      console.log(
        `${store.name}: ${ids.length} messages, ${unique.size} ids; lost ${lost.length}; ` +
          `written twice ${twice.length} (killed mid-handler: ${window.size}); unsettled on the ` +
          `killed consumers: ${unsettled.join(', ')}; survivor ` +
          `delivered ${survivor.reports('DELIVER').length}, acked ` +
          `${survivor.reports('ACK').length}, nacked ${survivor.reports('NACK').length}`,
      );
      expect(unsettled.every((n) => n > 0)).toBe(true);
      expect(lost).toEqual([]);
      if (store.transactional) expect(twice).toEqual([]);
      else expect(twice.filter((id) => !window.has(id))).toEqual([]);
      // Nothing unacked on the survivor: once it leaves, no message goes back to the queue.
      await survivor.stop();
      expect((await channel.checkQueue(queue)).messageCount).toBe(0);
    } finally {
      await Promise.all(consumers.map((c) => c.stop('SIGKILL')));
      await channel.deleteQueue(queue).catch(() => undefined);
      await connection.close();
    }
  }, 180_000);
});
