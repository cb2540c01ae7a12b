import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { SqsEmulator } from '../support/sqs';
import { AppProcess, buildLibrary } from './app-process';
import { publishingOrder, unsettledOn, until } from './stream';

/**
 * docs/consumers.md's SQS recipe under crashes: three consumer processes (fixtures/sqs-consumer-
 * process.js: @ssut/nestjs-sqs, a batch handler, `@IdempotentSqsMessage({ key: 'paymentId' })`)
 * share a queue of the SQS emulator (local-aws-sqs, run by this test); a retrying producer sends
 * 40% of the payments twice (a new MessageId each time); two consumers are SIGKILLed in the
 * middle of a handler, holding received messages, which SQS redelivers once their visibility
 * timeout runs out. Each payment's effect is a ledger row in PostgreSQL. With the PostgreSQL store
 * and `transactional: true`, no payment is lost and none is written twice; with the Redis store,
 * a payment is written twice only when its consumer died between the insert and storing the
 * outcome (the crash window). Either way the queue ends empty. RELIABILITY_FULL=1 sends more.
 * NestJS 11 only (the reliability project): @ssut/nestjs-sqs has no NestJS 12 release.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const MESSAGES = FULL ? 300 : 100;
const DUPLICATE_SHARE = 0.4;
/** The lease, and the queue's visibility timeout: a dead consumer's messages come back as its claims lapse. */
const LOCK_TTL = 2_000;

interface StoreCase {
  name: string;
  transactional: boolean;
  store(): Record<string, unknown>;
  cleanUp(): Promise<void>;
}

const records = uniqueTable('sqs_records');
const redisPrefix = uniquePrefix('sqs-consumers');

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

let sqs: SqsEmulator;
beforeAll(async () => {
  buildLibrary();
  sqs = await SqsEmulator.start();
}, 120_000);
afterAll(() => sqs?.stop());

describe.each(STORES)('SQS consumers killed mid-handler: $name', (store) => {
  const table = `idempotency_test_sqs_ledger_${randomUUID().slice(0, 8)}`;
  const ledgerOptions: DataSourceOptions = { type: 'postgres', url: testPostgresUrl() };
  let ledger: DataSource;

  beforeAll(async () => {
    ledger = await new DataSource(ledgerOptions).initialize();
    await ledger.query(`CREATE TABLE ${table} (payment_id varchar(64) NOT NULL)`);
  });
  afterAll(async () => {
    await ledger?.query(`DROP TABLE IF EXISTS ${table}`);
    await ledger?.destroy();
    await store.cleanUp();
  });

  /** Ledger rows per payment id. */
  const rows = async () => {
    const counted: { payment_id: string; n: string }[] = await ledger.query(
      `SELECT payment_id, count(*) AS n FROM ${table} GROUP BY payment_id`,
    );
    return new Map(counted.map((row) => [row.payment_id, Number(row.n)]));
  };

  const outcome = store.transactional
    ? 'none lost, none written twice'
    : 'none lost, written twice only when killed mid-handler';
  it(`${MESSAGES} messages, 40% sent twice, two SIGKILLs: ${outcome}, queue empty`, async () => {
    const queueUrl = await sqs.createQueue('ledger', {
      VisibilityTimeout: String(LOCK_TTL / 1_000),
    });
    const env = {
      SQS_ENDPOINT: sqs.endpoint,
      QUEUE_URL: queueUrl,
      STORE: JSON.stringify(store.store()),
      TRANSACTIONAL: store.transactional ? '1' : '0',
      LEDGER_DB: JSON.stringify(ledgerOptions),
      LEDGER_TABLE: table,
      LOCK_TTL: String(LOCK_TTL),
    };
    const start = () => AppProcess.start(env, 'sqs-consumer-process.js');
    const consumers: AppProcess[] = [];
    const started = Date.now();
    try {
      consumers.push(await start(), await start(), await start());
      // The producer: a payment sent again is a new message (a new MessageId), as a retry is.
      const ids = publishingOrder(MESSAGES, DUPLICATE_SHARE);
      const unique = new Set(ids);
      for (let i = 0; i < ids.length; i += 10) {
        await sqs.client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: ids.slice(i, i + 10).map((paymentId, n) => ({
              Id: String(n),
              MessageBody: JSON.stringify({ paymentId }),
            })),
          }),
        );
      }
      const killed = consumers.slice(0, 2);
      for (const [victim, share] of [
        [killed[0], 0.1],
        [killed[1], 0.15],
      ] as const) {
        // At an EFFECT line, while the victim holds received messages (an insert under way):
        // past its share of effects, the first moment it still holds some.
        const effects = Math.ceil(unique.size * share);
        const holds = () => victim.reports('DELIVER').length > victim.reports('SETTLED').length;
        await until(() => victim.reports('EFFECT').length >= effects && holds(), 60_000);
        await victim.stop('SIGKILL');
      }
      const survivor = consumers[2];
      /** Deliveries the survivor received and has not deleted or left on the queue yet. */
      const inHand = () =>
        survivor.reports('DELIVER').length -
        survivor.reports('SETTLED').length -
        survivor.reports('LEFT').length;
      const queueEmpty = async () => {
        const { visible, inFlight } = await sqs.messagesIn(queueUrl);
        return visible === 0 && inFlight === 0;
      };
      await until(
        async () => (await rows()).size === unique.size && inHand() === 0 && (await queueEmpty()),
        90_000,
      );
      // A receive that found nothing after that: no message was held by a receive under way.
      const empties = survivor.reports('EMPTY').length;
      await until(() => survivor.reports('EMPTY').length > empties, 10_000);
      expect(await queueEmpty()).toBe(true);

      const written = await rows();
      const lost = [...unique].filter((id) => !written.get(id));
      const twice = [...unique].filter((id) => written.get(id)! > 1);
      // The crash window: a killed consumer started the insert and never saw the message deleted.
      const window = unsettledOn(killed, 'EFFECT');
      const held = killed.map((c) => c.reports('DELIVER').length - c.reports('SETTLED').length);
      console.log(
        `SQS, ${store.name}: ${ids.length} messages, ${unique.size} payments; lost ` +
          `${lost.length}; written twice ${twice.length} (killed mid-handler: ${window.size}); ` +
          `held by the killed consumers: ${held.join(', ')}; survivor received ` +
          `${survivor.reports('DELIVER').length}, deleted ${survivor.reports('SETTLED').length}, ` +
          `left ${survivor.reports('LEFT').length}; errors ${survivor.reports('ERROR').length}; ` +
          `${((Date.now() - started) / 1_000).toFixed(1)} s`,
      );
      expect(held.every((n) => n > 0)).toBe(true);
      expect(lost).toEqual([]);
      if (store.transactional) expect(twice).toEqual([]);
      else expect(twice.filter((id) => !window.has(id))).toEqual([]);
      expect(survivor.reports('ERROR')).toEqual([]);
    } finally {
      await Promise.all(consumers.map((c) => c.stop('SIGKILL')));
      await sqs.deleteQueue(queueUrl);
    }
  }, 180_000);
});
