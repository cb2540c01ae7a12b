import { type Channel, connect as amqpConnect, type ChannelModel } from 'amqplib';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool } from 'pg';
import { requireBroker, RMQ_URL } from '../support/microservice-app';
import { dropMysqlTable, testMysqlPool, testMysqlUrl } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';
import { AppProcess, buildLibrary } from './app-process';
import { driveAll, KillSchedule } from './stream';

/**
 * Resumable handlers across crashes (issue 35's proof). An orders app in its own process
 * (fixtures/orders-process.js) runs the issue's four-step handler: an order row in the
 * database, a charge at a provider that deduplicates by the key derived in the step, an e-mail
 * to a sink that deduplicates nothing, an event on a RabbitMQ queue. A retrying client drives
 * many orders through it while the test SIGKILLs it at random points and restarts it; the same
 * handler without steps (plain `@Idempotent()`, `transactional` on the SQL stores) runs beside
 * it. Everything is counted outside the module: order rows in the database, charges at the
 * provider, e-mails at the sink, messages in the queue, and each part's executions from the
 * marks the app prints as it enters and leaves them (with the step's record, read from the
 * store's own table, when it started: a step run after its record was written is a re-run the
 * steps were meant to prevent).
 * With steps, on PostgreSQL and MariaDB (each step transactional where it writes the database):
 * one order row per order, one charge, and an e-mail or event sent again only by a kill inside
 * that step (between its effect and its record), at most once per such kill; no step re-run
 * after its record. On Redis the order step has the same window, counted.
 * RELIABILITY_FULL=1 (npm run test:reliability) runs the issue's 200 orders and 6 kills.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const RUN = FULL
  ? { orders: 200, kills: 6, inFlight: 20 }
  : { orders: 120, kills: 4, inFlight: 20 };
/** The lease, in ms: short, so that orders a killed app held free up quickly. */
const LOCK_TTL = 1_000;
/** After its last step the handler waits a random 0 to HOLD_MS ms before it answers. */
const HOLD_MS = 30;
/** The provider and the sink answer a random 0 to LATENCY_MS ms after the request arrived. */
const LATENCY_MS = 10;
/** A client gives an order up (and the test fails) after this many attempts. */
const MAX_ATTEMPTS = 200;
const PARTS = ['order', 'charge', 'email', 'event'] as const;
type Part = (typeof PARTS)[number];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Counts per order (its key), and the executions (`exec`) behind each. */
class Tally {
  readonly byOrder = new Map<string, string[]>();

  add(order: string, exec: string): void {
    this.byOrder.set(order, [...(this.byOrder.get(order) ?? []), exec]);
  }

  count(order: string): number {
    return this.byOrder.get(order)?.length ?? 0;
  }

  total(): number {
    return [...this.byOrder.values()].reduce((sum, execs) => sum + execs.length, 0);
  }
}

/** A local HTTP service: `handle` gets the parsed body and headers, the answer is sent later. */
async function startService(
  handle: (body: Record<string, string>, request: IncomingMessage) => unknown,
): Promise<{ server: Server; url: string }> {
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const answer = handle(JSON.parse(Buffer.concat(chunks).toString()), request);
      // The effect happened on arrival; its answer comes back with some latency, in which a
      // crash of the caller loses it.
      setTimeout(() => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(answer));
      }, Math.random() * LATENCY_MS);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Where the orders (and, on the SQL stores, the records) live, seen by the test. */
interface Database {
  name: string;
  env: Record<string, string>;
  createOrders(table: string): Promise<void>;
  /** Order rows: key and the execution that inserted it. */
  orders(table: string): Promise<{ id: number; key: string; exec: string }[]>;
  drop(table: string): Promise<void>;
}

describe('resumable handlers across crashes: four steps, SIGKILLed mid-stream', () => {
  const prefix = uniquePrefix('resumable-steps');
  const secret = randomUUID() + randomUUID();
  const tables: { db: Database; table: string }[] = [];
  const apps: AppProcess[] = [];
  let pool: Pool;
  let mysql: MysqlPool;
  let redis: Redis;
  let rabbit: ChannelModel;
  let channel: Channel;
  let provider: { server: Server; url: string };
  let sink: { server: Server; url: string };
  // What the outside world saw, reset per run.
  let charges: Tally;
  let emails: Tally;
  let providerKeys: Map<string, number>;
  /** The charge the provider made for each order (the first, when a bug made more). */
  let chargeOf: Map<string, number>;

  const postgres: Database = {
    name: 'PostgreSQL',
    env: { STORE: 'postgres' },
    createOrders: async (table) =>
      void (await pool.query(
        `CREATE TABLE "${table}" (id serial PRIMARY KEY, key text NOT NULL, pid int NOT NULL, ` +
          'exec text NOT NULL)',
      )),
    orders: async (table) =>
      (
        await pool.query<{ id: number; key: string; exec: string }>(
          `SELECT id, key, exec FROM "${table}" ORDER BY id`,
        )
      ).rows,
    drop: (table) => dropTable(pool, table),
  };
  const mariadb: Database = {
    name: 'MariaDB',
    env: { STORE: 'mysql' },
    createOrders: async (table) =>
      void (await mysql.query(
        `CREATE TABLE \`${table}\` (id INT AUTO_INCREMENT PRIMARY KEY, \`key\` VARCHAR(100) ` +
          'NOT NULL, pid INT NOT NULL, exec VARCHAR(40) NOT NULL) ENGINE=InnoDB',
      )),
    orders: async (table) =>
      (await mysql.query(`SELECT id, \`key\`, exec FROM \`${table}\` ORDER BY id`))[0] as {
        id: number;
        key: string;
        exec: string;
      }[],
    drop: (table) => dropMysqlTable(mysql, table),
  };
  const redisStore: Database = {
    ...postgres,
    name: 'Redis',
    env: { STORE: 'redis', KEY_PREFIX: `${prefix}records:` },
  };

  beforeAll(async () => {
    buildLibrary();
    await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
    pool = await testPool();
    mysql = await testMysqlPool();
    redis = inspectionClient();
    await redis.ping().catch((error: Error) => {
      throw new Error(`these tests need Redis at ${testRedisUrl()}: ${error.message}`);
    });
    rabbit = await amqpConnect(RMQ_URL);
    channel = await rabbit.createChannel();
    // A provider that deduplicates by Idempotency-Key, as Stripe does: one charge per key.
    provider = await startService((body, request) => {
      const key = String(request.headers['idempotency-key']);
      let id = providerKeys.get(key);
      if (id === undefined) {
        charges.add(body.order, body.exec);
        providerKeys.set(key, (id = charges.total()));
        if (!chargeOf.has(body.order)) chargeOf.set(body.order, id);
      }
      return { id };
    });
    // A mail server: every e-mail it receives goes out.
    sink = await startService((body) => {
      emails.add(body.order, body.exec);
      return { sent: true };
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop('SIGKILL')));
    for (const { db, table } of tables) await db.drop(table);
    provider?.server.close();
    sink?.server.close();
    await rabbit?.close();
    await pool?.end();
    await mysql?.end();
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
  });

  /** Every message in `queue` (read off it), by order. */
  async function drainQueue(queue: string): Promise<Tally> {
    const events = new Tally();
    for (let message = await channel.get(queue, { noAck: true }); message;) {
      const { order, exec } = JSON.parse(message.content.toString()) as Record<string, string>;
      events.add(order, exec);
      message = await channel.get(queue, { noAck: true });
    }
    return events;
  }

  /**
   * Drives RUN.orders orders through the app with a retrying client while SIGKILLing it
   * RUN.kills times at random points and restarting it.
   */
  async function crashRun(env: Record<string, string>) {
    const runId = randomUUID().slice(0, 8);
    const keys = Array.from({ length: RUN.orders }, (_, i) => `order-${runId}-${i}`);
    const outcomes = new Map<string, { order: number; charge: number }>();
    const inFlight = new Map<number, number>(); // app pid -> requests in flight
    const kills: { victim: AppProcess; inFlight: number }[] = [];
    const all: AppProcess[] = [];
    let requests = 0;

    const launch = async () => {
      const app = await AppProcess.start(
        { ...env, LOCK_TTL: String(LOCK_TTL), HOLD_MS: String(HOLD_MS) },
        'orders-process.js',
      );
      apps.push(app);
      all.push(app);
      return app;
    };
    let current = launch();
    await current;

    const kill = async () => {
      const victim = await current;
      await sleep(Math.random() * HOLD_MS); // a random point, not a synchronisation
      kills.push({ victim, inFlight: inFlight.get(victim.pid) ?? 0 });
      await victim.stop('SIGKILL');
      current = launch();
      await current;
    };
    // Kill points spread over the run by completed keys, each at a random moment of a hold.
    const schedule = new KillSchedule(RUN.orders, RUN.kills, kill);

    const drive = async (key: string) => {
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const app = await current;
        inFlight.set(app.pid, (inFlight.get(app.pid) ?? 0) + 1);
        requests++;
        const response = await post(app.url, '/orders', { key, body: { amount: 100 } })
          .catch(() => undefined) // the app died under the request: the outcome is unknown
          .finally(() => inFlight.set(app.pid, inFlight.get(app.pid)! - 1));
        if (response && response.status < 300) {
          outcomes.set(key, response.json() as { order: number; charge: number });
          schedule.progressed();
          return;
        }
        if (response && ![409, 503].includes(response.status)) {
          throw new Error(`${key}: unexpected ${response.status} ${response.text}`);
        }
        await sleep(20 + Math.random() * 40);
      }
      throw new Error(`${key}: no 2xx after ${MAX_ATTEMPTS} attempts`);
    };

    const started = performance.now();
    await driveAll(keys, RUN.inFlight, drive);
    await schedule.settled();
    const seconds = (performance.now() - started) / 1_000;
    await (await current).stop('SIGKILL');
    return { keys, outcomes, kills, all, requests, seconds };
  }

  /** One execution of a part, as the app's marks tell it. */
  interface Execution {
    key: string;
    part: Part;
    exec: string;
    /** The step's record was in the store when it started (`-`: no steps). */
    marker: string;
    /** It returned (with steps: its record was written). */
    exited: boolean;
  }

  function executions(app: AppProcess): Execution[] {
    const exited = new Set(app.reports('EXIT').map((line) => line.split(' ')[2]));
    return app.reports('ENTER').map((line) => {
      const [key, part, exec, marker] = line.split(' ');
      return { key, part: part as Part, exec, marker, exited: exited.has(exec) };
    });
  }

  /** Runs the crash test on `db` with or without steps; counts, prints and checks. */
  async function crashTest(db: Database, withSteps: boolean) {
    const ordersTable = uniqueTable('orders');
    const ordersDb = db === redisStore ? postgres : db;
    tables.push({ db: ordersDb, table: ordersTable });
    await ordersDb.createOrders(ordersTable);
    const records = uniqueTable('records');
    if (db !== redisStore) tables.push({ db, table: records });
    const queue = `idempotency-steps-${randomUUID().slice(0, 8)}`;
    await channel.assertQueue(queue, { durable: false });
    charges = new Tally();
    emails = new Tally();
    providerKeys = new Map();
    chargeOf = new Map();

    let run: Awaited<ReturnType<typeof crashRun>>;
    let events: Tally;
    try {
      run = await crashRun({
        ...db.env,
        STEPS: withSteps ? '1' : '0',
        POSTGRES_URL: testPostgresUrl(),
        MYSQL_URL: testMysqlUrl(),
        REDIS_URL: testRedisUrl(),
        RECORDS_TABLE: records,
        ORDERS_TABLE: ordersTable,
        PROVIDER_URL: provider.url,
        SINK_URL: sink.url,
        RMQ_URL,
        QUEUE: queue,
        KEY_SECRET: secret,
      });
      events = await drainQueue(queue);
    } finally {
      await channel.deleteQueue(queue).catch(() => undefined);
    }

    const rows = new Tally();
    const ids = new Map<string, number[]>();
    for (const row of await ordersDb.orders(ordersTable)) {
      rows.add(row.key, row.exec);
      ids.set(row.key, [...(ids.get(row.key) ?? []), Number(row.id)]);
    }
    const victims = new Set(run.kills.map(({ victim }) => victim));
    // Per part, per order: the executions a kill cut (entered, never returned), and of those
    // the ones whose effect had happened (a row committed, a charge, an e-mail or a message
    // carrying its exec): the crash window of that part.
    const effects: Record<Part, Tally> = {
      order: rows,
      charge: charges,
      email: emails,
      event: events,
    };
    const perPart = () =>
      Object.fromEntries(PARTS.map((part) => [part, new Tally()])) as Record<Part, Tally>;
    const [ran, cut, cutAfterEffect] = [perPart(), perPart(), perPart()];
    let afterMarker = 0;
    for (const app of run.all) {
      for (const execution of executions(app)) {
        const { key, part, exec } = execution;
        ran[part].add(key, exec);
        if (execution.marker === '1') afterMarker++;
        if (execution.exited || !victims.has(app)) continue;
        cut[part].add(key, exec);
        if (effects[part].byOrder.get(key)?.includes(exec)) cutAfterEffect[part].add(key, exec);
      }
    }
    const extra = (tally: Tally) =>
      run.keys.reduce((sum, key) => sum + Math.max(tally.count(key) - 1, 0), 0);
    const reRuns = PARTS.reduce((sum, part) => sum + extra(ran[part]), 0);
    const missing = (tally: Tally) => run.keys.filter((key) => tally.count(key) === 0);
    // Orders with more effects of `part` than one, plus one per kill that landed inside that
    // part after its effect and before its return (with steps: its record). Tighter than one
    // per kill inside the part: a kill there before the effect costs nothing.
    const unexplained = (part: Part) =>
      run.keys.filter((key) => effects[part].count(key) - 1 > cutAfterEffect[part].count(key));
    const name = `${db.name}, ${withSteps ? 'steps' : 'no steps'}`;
    console.log(
      `${name}: ${run.keys.length} orders, ${run.kills.length} SIGKILLs; ` +
        `order rows ${rows.total()} (extra ${extra(rows)}), charges ${charges.total()}, ` +
        `e-mails ${emails.total()} (extra ${extra(emails)}), events ${events.total()} ` +
        `(extra ${extra(events)}); parts run again ${reRuns}` +
        (withSteps ? `, steps run again after their record ${afterMarker}` : '') +
        '; requests a kill cut inside ' +
        PARTS.map(
          (p) => `${p} ${cut[p].total()} (${cutAfterEffect[p].total()} after its effect)`,
        ).join(', ') +
        `; ${run.requests} requests; ${run.seconds.toFixed(1)} s`,
    );

    // Every order completed, its answer names its committed row and its one charge.
    expect(run.outcomes.size).toBe(run.keys.length);
    expect(run.kills).toHaveLength(RUN.kills);
    for (const kill of run.kills) expect(kill.inFlight).toBeGreaterThan(0);
    // The kills cut handlers inside their parts, not only between requests.
    expect(PARTS.reduce((sum, part) => sum + cut[part].total(), 0)).toBeGreaterThan(0);
    expect(missing(rows)).toEqual([]);
    expect(missing(charges)).toEqual([]);
    expect(missing(emails)).toEqual([]);
    expect(missing(events)).toEqual([]);
    const dangling = run.keys.filter((key) => {
      const outcome = run.outcomes.get(key);
      return (
        !ids.get(key)?.includes(Number(outcome?.order)) || outcome?.charge !== chargeOf.get(key)
      );
    });
    expect(dangling).toEqual([]);
    // The derived key makes a re-run charge a retry at the provider, with or without steps.
    expect(charges.total()).toBe(run.keys.length);
    return { rows, emails, events, afterMarker, unexplained, extra };
  }

  describe.each([
    ['PostgreSQL', () => postgres],
    ['MariaDB', () => mariadb],
  ])('%s, transactional', (_, of) => {
    it(`with steps: ${RUN.orders} orders, ${RUN.kills} SIGKILLs, one row and one charge per order, an e-mail or event again only per kill inside its step, no step re-run after its record`, async () => {
      const result = await crashTest(of(), true);
      expect(result.extra(result.rows)).toBe(0);
      expect(result.afterMarker).toBe(0);
      expect(result.unexplained('email')).toEqual([]);
      expect(result.unexplained('event')).toEqual([]);
    }, 300_000);

    it(`without steps: ${RUN.orders} orders, ${RUN.kills} SIGKILLs, one row and one charge per order (counts of e-mails and events printed)`, async () => {
      const result = await crashTest(of(), false);
      expect(result.extra(result.rows)).toBe(0);
    }, 300_000);
  });

  describe('Redis', () => {
    it(`with steps: ${RUN.orders} orders, ${RUN.kills} SIGKILLs, a row, e-mail or event again only per kill inside its step, no step re-run after its record`, async () => {
      const result = await crashTest(redisStore, true);
      expect(result.afterMarker).toBe(0);
      // The order step's window (its insert commits alone, its record follows): counted.
      expect(result.unexplained('order')).toEqual([]);
      expect(result.unexplained('email')).toEqual([]);
      expect(result.unexplained('event')).toEqual([]);
    }, 300_000);

    it(`without steps: ${RUN.orders} orders, ${RUN.kills} SIGKILLs, one charge per order (rows, e-mails and events printed)`, async () => {
      await crashTest(redisStore, false);
    }, 300_000);
  });
});
