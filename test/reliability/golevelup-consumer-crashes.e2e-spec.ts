import { type Channel, connect as amqpConnect } from 'amqplib';
import { randomUUID } from 'node:crypto';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { requireBroker, RMQ_URL } from '../support/microservice-app';
import { testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { AppProcess, buildLibrary } from './app-process';
import { KillSchedule, publishingOrder, unsettledOn, until } from './stream';

/**
 * @golevelup/nestjs-rabbitmq handlers under crashes: two consumer processes
 * (fixtures/golevelup-consumer-process.js: `@RabbitSubscribe()` + `@Idempotent()`, the key in
 * the Idempotency-Key header, prefetch 10) share a queue; the publisher sends 30% of the events
 * twice; the test SIGKILLs a consumer in the middle of a handler (an insert under way, other
 * deliveries held), several times over the run, and starts a new one each time. RabbitMQ
 * redelivers what a dead consumer held; its claims lapse after the lease. Each event's effect is a
 * ledger row in PostgreSQL. With the PostgreSQL store and `transactional: true`, no event is lost
 * and none is written twice; with the Redis store, an event is written twice only when its
 * consumer died between the insert and storing the outcome (the crash window). Either way every
 * delivery is settled, the queue ends empty and nothing is dead-lettered. RELIABILITY_FULL=1
 * sends more and kills more. NestJS 11 only: golevelup has no NestJS 12 release.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const RUN = FULL ? { messages: 300, kills: 6 } : { messages: 100, kills: 3 };
const DUPLICATE_SHARE = 0.3;
const LOCK_TTL = 2_000;
/** ms between two messages: the stream lasts long enough for the kills to land in it. */
const PACE_MS = 80;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface StoreCase {
  name: string;
  /** `transactional: true`: no event may run twice. */
  transactional: boolean;
  store(): Record<string, unknown>;
  cleanUp(): Promise<void>;
}

const records = uniqueTable('golevelup_records');
const redisPrefix = uniquePrefix('golevelup-consumers');

const STORES: StoreCase[] = [
  {
    name: 'PostgreSQL store, transactional',
    transactional: true,
    store: () => ({
      postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
    }),
    cleanUp: async () => {
      const pool = await testPool();
      await pool.query(`DROP TABLE IF EXISTS "${records}"`);
      await pool.end();
    },
  },
  {
    name: 'Redis store',
    transactional: false,
    store: () => ({ redis: testRedisUrl(), keyPrefix: redisPrefix }),
    cleanUp: async () => {
      const redis = inspectionClient();
      await deleteKeysUnder(redis, redisPrefix);
      await redis.quit();
    },
  },
];

beforeAll(() => buildLibrary(), 120_000);

describe.each(STORES)('golevelup consumers killed mid-handler: $name', (store) => {
  const table = `idempotency_test_golevelup_ledger_${randomUUID().slice(0, 8)}`;
  const ledgerOptions: DataSourceOptions = { type: 'postgres', url: testPostgresUrl() };
  let ledger: DataSource;

  beforeAll(async () => {
    await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
    ledger = await new DataSource(ledgerOptions).initialize();
    await ledger.query(`CREATE TABLE ${table} (event_id varchar(64) NOT NULL)`);
  });
  afterAll(async () => {
    await ledger?.query(`DROP TABLE IF EXISTS ${table}`);
    await ledger?.destroy();
    await store.cleanUp();
  });

  /** Ledger rows per event id. */
  const rows = async () => {
    const counted: { event_id: string; n: string }[] = await ledger.query(
      `SELECT event_id, count(*) AS n FROM ${table} GROUP BY event_id`,
    );
    return new Map(counted.map((row) => [row.event_id, Number(row.n)]));
  };

  const outcome = store.transactional
    ? 'none lost, none written twice'
    : 'none lost, written twice only when killed mid-handler';
  it(`${RUN.messages} messages, 30% published twice, ${RUN.kills} SIGKILLs: ${outcome}`, async () => {
    const run = randomUUID().slice(0, 8);
    const queue = `idempotency-golevelup-ledger-${run}`;
    const deadQueue = `idempotency-golevelup-ledger-dead-${run}`;
    const exchange = `idempotency.golevelup.ledger.${run}`;
    const env = {
      BROKER_URL: RMQ_URL,
      EXCHANGE: exchange,
      QUEUE: queue,
      DEAD_QUEUE: deadQueue,
      STORE: JSON.stringify(store.store()),
      TRANSACTIONAL: store.transactional ? '1' : '0',
      LEDGER_DB: JSON.stringify(ledgerOptions),
      LEDGER_TABLE: table,
      LOCK_TTL: String(LOCK_TTL),
    };
    const start = () => AppProcess.start(env, 'golevelup-consumer-process.js');
    const connection = await amqpConnect(RMQ_URL);
    const channel: Channel = await connection.createChannel();
    const consumers: AppProcess[] = [];
    const killed: AppProcess[] = [];
    const started = Date.now();
    try {
      consumers.push(await start(), await start());
      const ids = publishingOrder(RUN.messages, DUPLICATE_SHARE);
      const unique = new Set(ids);
      // Each kill: one consumer in turn, once it is in the middle of a handler (or after 5 s
      // without one), then a new consumer in its place.
      const kill = async () => {
        const slot = killed.length % consumers.length;
        const victim = consumers[slot];
        const effects = victim.reports('EFFECT').length;
        await Promise.race([
          victim.waitForReports('EFFECT', effects + 1),
          new Promise((resolve) => setTimeout(resolve, 5_000)),
        ]);
        await victim.stop('SIGKILL');
        killed.push(victim);
        consumers[slot] = await start();
      };
      const schedule = new KillSchedule(unique.size, RUN.kills, kill);
      // The publisher, at a steady pace (a retrying producer sends an event again as a new message).
      const publishing = (async () => {
        for (const eventId of ids) {
          const content = Buffer.from(JSON.stringify({ eventId }));
          channel.publish(exchange, 'ledger.entry', content, {
            headers: { 'Idempotency-Key': eventId },
          });
          await sleep(PACE_MS);
        }
      })();
      let progressed = 0;
      /** Every delivery a live consumer received was acked or nacked. */
      const settledAll = () =>
        consumers.every(
          (c) => c.reports('DELIVER').length === c.reports('ACK').length + c.reports('NACK').length,
        );
      await until(async () => {
        const done = (await rows()).size;
        for (; progressed < done; progressed++) schedule.progressed();
        if (done < unique.size || !settledAll()) return false;
        return (await channel.checkQueue(queue)).messageCount === 0;
      }, 150_000);
      await publishing;
      await schedule.settled();
      await until(async () => settledAll(), 30_000);

      const written = await rows();
      const lost = [...unique].filter((id) => !written.get(id));
      const twice = [...unique].filter((id) => written.get(id)! > 1);
      // The crash window: a killed consumer started the insert, its handling never ended.
      const window = unsettledOn(killed, 'EFFECT');
      const held = killed.map((c) => c.reports('DELIVER').length - c.reports('SETTLED').length);
      const survivors = consumers.map(
        (c) =>
          `${c.reports('DELIVER').length} delivered / ${c.reports('ACK').length} acked / ` +
          `${c.reports('NACK').length} nacked`,
      );
      const deadLettered = (await channel.checkQueue(deadQueue)).messageCount;
      console.log(
        `golevelup, ${store.name}: ${ids.length} messages, ${unique.size} events; lost ` +
          `${lost.length}; written twice ${twice.length} (killed mid-handler: ${window.size}); ` +
          `${killed.length} kills, deliveries held by the killed consumers: ${held.join(', ')}; ` +
          `consumers at the end: ${survivors.join(', ')}; dead-lettered ${deadLettered}; ` +
          `${((Date.now() - started) / 1_000).toFixed(1)} s`,
      );
      expect(killed).toHaveLength(RUN.kills);
      expect(lost).toEqual([]);
      if (store.transactional) expect(twice).toEqual([]);
      else expect(twice.filter((id) => !window.has(id))).toEqual([]);
      expect(deadLettered).toBe(0);
      expect(consumers.flatMap((c) => c.reports('NACK'))).not.toContainEqual(
        expect.stringMatching(/ false$/),
      );
      // Nothing unacked: once the consumers leave, no message goes back to the queue.
      await Promise.all(consumers.map((c) => c.stop()));
      expect((await channel.checkQueue(queue)).messageCount).toBe(0);
    } finally {
      await Promise.all([...consumers, ...killed].map((c) => c.stop('SIGKILL')));
      await channel.deleteQueue(queue).catch(() => undefined);
      await channel.deleteQueue(deadQueue).catch(() => undefined);
      await channel.deleteExchange(exchange).catch(() => undefined);
      await connection.close();
    }
  }, 240_000);
});
