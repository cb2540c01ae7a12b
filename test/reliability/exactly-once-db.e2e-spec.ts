import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool } from 'pg';
import { dropMysqlTable, testMysqlPool, testMysqlUrl } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';
import { AppProcess, buildLibrary } from './app-process';
import { driveAll, KillSchedule } from './stream';

/**
 * Exactly-once side effects across crashes (issue 16's proof). A payments app in its own process
 * (fixtures/payments-process.js) inserts a payment row into PostgreSQL through TypeORM, then
 * answers; a retrying client drives many keys through it while the test SIGKILLs it at random
 * points and restarts it. With the PostgreSQL store and `transactional: true` the row and the
 * record's completion commit together: one row per key, always. With Redis the row commits by
 * itself before the completion is stored: a crash in between runs the payment again on retry,
 * and the test reports how often. Rows are counted in the database, never through the module.
 * The transactional crash and zombie tests run on PostgreSQL and on MariaDB (the MySQL store,
 * payments in MariaDB through TypeORM's mysql driver).
 * RELIABILITY_FULL=1 (npm run test:reliability) runs a bigger storm.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const RUN = FULL ? { keys: 2_000, kills: 12, inFlight: 40 } : { keys: 300, kills: 6, inFlight: 20 };
/** The lease, in ms: short, so that keys a killed app held free up quickly. */
const LOCK_TTL = 1_000;
/** The handler waits a random 0 to HOLD_MS ms between its insert and its answer. */
const HOLD_MS = 30;
/** A client gives a key up (and the test fails) after this many attempts. */
const MAX_ATTEMPTS = 200;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** What the client finally got for a key. */
interface Outcome {
  status: number;
  body: { id: number; pid: number };
  replayed: boolean;
  attempts: number;
}

/** One request the client sent, and what came of it. */
interface Attempt {
  key: string;
  pid: number;
  result: number | 'network';
}

/** A database the payments (and the records, transactional) live in, seen by the test. */
interface Database {
  name: 'PostgreSQL' | 'MariaDB';
  /** The payments app's STORE and its URL variable. */
  env: Record<string, string>;
  createPayments(table: string): Promise<void>;
  /** Payment rows, in insertion order. */
  payments(table: string, key?: string): Promise<{ id: number; key: string; pid: number }[]>;
  /** The record's state and the ms its lease has left, on the database's clock. */
  record(table: string, key: string): Promise<{ state: string; left_ms: number }[]>;
  drop(table: string): Promise<void>;
}

describe('exactly-once side effects in PostgreSQL and MariaDB', () => {
  const prefix = uniquePrefix('exactly-once-db');
  const tables: { db: Database; table: string }[] = [];
  const apps: AppProcess[] = [];
  let pool: Pool;
  let mysql: MysqlPool;
  let redis: Redis;

  const postgres: Database = {
    name: 'PostgreSQL',
    env: { STORE: 'postgres', POSTGRES_URL: testPostgresUrl() },
    createPayments: async (table) =>
      void (await pool.query(
        `CREATE TABLE "${table}" (id serial PRIMARY KEY, key text NOT NULL, pid int NOT NULL, ` +
          'created_at timestamptz NOT NULL DEFAULT clock_timestamp())',
      )),
    payments: async (table, key) =>
      (
        await pool.query<{ id: number; key: string; pid: number }>(
          `SELECT id, key, pid FROM "${table}" WHERE $1::text IS NULL OR key = $1 ORDER BY id`,
          [key ?? null],
        )
      ).rows,
    record: async (table, key) =>
      (
        await pool.query<{ state: string; left_ms: number }>(
          `SELECT state, (extract(epoch FROM expires_at - statement_timestamp()) * 1000)::float8
             AS left_ms FROM "${table}" WHERE key = $1`,
          [key],
        )
      ).rows,
    drop: (table) => dropTable(pool, table),
  };
  const mariadb: Database = {
    name: 'MariaDB',
    env: { STORE: 'mysql', MYSQL_URL: testMysqlUrl() },
    createPayments: async (table) =>
      void (await mysql.query(
        `CREATE TABLE \`${table}\` (id INT AUTO_INCREMENT PRIMARY KEY, \`key\` VARCHAR(100) ` +
          'NOT NULL, pid INT NOT NULL, created_at DATETIME(6) NOT NULL DEFAULT NOW(6)) ENGINE=InnoDB',
      )),
    payments: async (table, key) =>
      (
        await mysql.query(
          `SELECT id, \`key\`, pid FROM \`${table}\` WHERE ? IS NULL OR \`key\` = ? ORDER BY id`,
          [key ?? null, key ?? null],
        )
      )[0] as { id: number; key: string; pid: number }[],
    record: async (table, key) =>
      (
        (
          await mysql.query(
            `SELECT state, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000
               AS left_ms FROM \`${table}\` WHERE \`key\` = ?`,
            [key],
          )
        )[0] as { state: string; left_ms: string }[]
      ).map((row) => ({ state: row.state, left_ms: Number(row.left_ms) })),
    drop: (table) => dropMysqlTable(mysql, table),
  };

  beforeAll(async () => {
    buildLibrary();
    pool = await testPool();
    mysql = await testMysqlPool();
    redis = inspectionClient();
    await redis.ping().catch((error: Error) => {
      throw new Error(`these tests need Redis at ${testRedisUrl()}: ${error.message}`);
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop('SIGKILL')));
    for (const { db, table } of tables) await db.drop(table);
    await pool?.end();
    await mysql?.end();
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
  });

  async function paymentsTable(db: Database): Promise<string> {
    const table = uniqueTable('payments');
    tables.push({ db, table });
    await db.createPayments(table);
    return table;
  }

  function recordsTable(db: Database): string {
    const table = uniqueTable('records');
    tables.push({ db, table });
    return table;
  }

  async function start(env: Record<string, string>): Promise<AppProcess> {
    const app = await AppProcess.start(
      { POSTGRES_URL: testPostgresUrl(), LOCK_TTL: String(LOCK_TTL), ...env },
      'payments-process.js',
    );
    apps.push(app);
    return app;
  }

  /** Payment rows per key. */
  async function rowsPerKey(
    db: Database,
    table: string,
  ): Promise<Map<string, { id: number; pid: number }[]>> {
    const rows = await db.payments(table);
    const byKey = new Map<string, { id: number; pid: number }[]>();
    for (const row of rows) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row]);
    return byKey;
  }

  /**
   * Drives RUN.keys keys through the app with a retrying client while SIGKILLing it RUN.kills
   * times at random points and restarting it; returns what each key got and what happened.
   */
  async function crashRun(env: Record<string, string>) {
    const runId = randomUUID().slice(0, 8);
    const keys = Array.from({ length: RUN.keys }, (_, i) => `pay-${runId}-${i}`);
    const outcomes = new Map<string, Outcome>();
    const attempts: Attempt[] = [];
    const inFlight = new Map<number, number>(); // app pid -> requests in flight
    const kills: { victim: AppProcess; inFlight: number }[] = [];

    const launch = () => start({ ...env, HOLD_MS: String(HOLD_MS) });
    let current = launch();
    await current;

    const kill = async () => {
      const victim = await current;
      await sleep(Math.random() * HOLD_MS); // a random point, not a synchronisation
      kills.push({ victim, inFlight: inFlight.get(victim.pid) ?? 0 });
      const exited = once(victim.child, 'exit');
      victim.child.kill('SIGKILL');
      await exited;
      current = launch();
      await current;
    };
    // Kill points spread over the run by completed keys, each at a random moment of a hold.
    const schedule = new KillSchedule(RUN.keys, RUN.kills, kill);

    const drive = async (key: string) => {
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const app = await current;
        inFlight.set(app.pid, (inFlight.get(app.pid) ?? 0) + 1);
        let response: Awaited<ReturnType<typeof post>> | undefined;
        try {
          response = await post(app.url, '/payments', { key, body: { amount: 100 } });
        } catch {
          // The app died under the request (or was down): the outcome is unknown, retry.
        } finally {
          inFlight.set(app.pid, inFlight.get(app.pid)! - 1);
        }
        attempts.push({ key, pid: app.pid, result: response?.status ?? 'network' });
        if (response && response.status >= 200 && response.status < 300) {
          outcomes.set(key, {
            status: response.status,
            body: response.json() as Outcome['body'],
            replayed: response.headers.get('idempotent-replayed') === 'true',
            attempts: attempt,
          });
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

    const count = (result: Attempt['result']) => attempts.filter((a) => a.result === result).length;
    const stats = {
      keys: keys.length,
      kills: kills.length,
      requests: attempts.length,
      retries: attempts.length - keys.length,
      network: count('network'),
      conflicts: count(409),
      unavailable: count(503),
      replays: [...outcomes.values()].filter((o) => o.replayed).length,
      seconds,
    };
    return { keys, outcomes, kills, attempts, stats };
  }

  /**
   * Checks what every store must give; counts keys with more than one payment, and what the kills
   * cut: requests a killed app never answered, how many of those had inserted their row (its
   * `INSERTED` line), and how many of those rows are in the table (committed) or not (rolled back).
   */
  async function tally(
    name: string,
    db: Database,
    table: string,
    run: Awaited<ReturnType<typeof crashRun>>,
  ) {
    const rows = await rowsPerKey(db, table);
    const victims = new Map(run.kills.map(({ victim }) => [victim.pid, victim]));
    // (app, key) pairs the app answered with a 2xx (after which the client stopped sending it).
    const answered = new Set(
      run.attempts
        .filter((a) => a.result !== 'network' && a.result < 300)
        .map((a) => `${a.pid} ${a.key}`),
    );
    const cut = run.attempts.filter((a) => a.result === 'network' && victims.has(a.pid));
    // Keys a killed app's handler had inserted when it died (it never answered them).
    const afterInsert = [...victims.values()].flatMap((victim) =>
      victim
        .reports('INSERTED')
        .map((line) => line.split(' ')[0])
        .filter((key) => !answered.has(`${victim.pid} ${key}`))
        .map((key) => ({ key, pid: victim.pid })),
    );
    const rowOf = (key: string, pid: number) => rows.get(key)?.some((row) => row.pid === pid);
    const rolledBack = afterInsert.filter(({ key, pid }) => !rowOf(key, pid));
    // Payments a killed app committed for a request it never answered: the side effect happened,
    // the client never heard of it, and it retried.
    const unanswered = run.keys.flatMap((key) =>
      (rows.get(key) ?? [])
        .filter((row) => victims.has(row.pid) && !answered.has(`${row.pid} ${key}`))
        .map(() => key),
    );

    const lost = run.keys.filter((key) => !rows.get(key)?.length);
    const duplicated = run.keys.filter((key) => (rows.get(key)?.length ?? 0) > 1);
    // The 2xx a key got names a committed payment of that key, from the process that made it.
    const dangling = run.keys.filter((key) => {
      const body = run.outcomes.get(key)?.body;
      return !rows.get(key)?.some((row) => row.id === body?.id && row.pid === body?.pid);
    });
    const s = {
      ...run.stats,
      duplicates: duplicated.length,
      cut: cut.length,
      afterInsert: afterInsert.length,
      rolledBack: rolledBack.length,
      unanswered: unanswered.length,
    };
    console.log(
      `${name}: ${s.keys} keys, ${s.kills} kills, duplicates ${s.duplicates}; ` +
        `requests cut by a kill ${s.cut}, ${s.afterInsert} of them after the insert ` +
        `(rolled back ${s.rolledBack}); payments a killed app committed and never answered ` +
        `${s.unanswered}; ${s.requests} requests, ${s.retries} retries ` +
        `(${s.network} network errors, ${s.conflicts} 409, ${s.unavailable} 503), ` +
        `${s.replays} keys ended on a replay; ${s.seconds.toFixed(1)} s`,
    );

    expect(run.outcomes.size).toBe(run.keys.length);
    expect(run.kills).toHaveLength(RUN.kills);
    // The crash window was exercised: every kill cut requests in flight, and handlers after
    // their insert were among them.
    for (const kill of run.kills) expect(kill.inFlight).toBeGreaterThan(0);
    expect(afterInsert.length).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    expect(dangling).toEqual([]);
    return { duplicated, rows, unanswered };
  }

  it.each([
    ['PostgreSQL', () => postgres],
    ['MariaDB', () => mariadb],
  ])(
    `crash, %s transactional: ${RUN.keys} keys, ${RUN.kills} SIGKILLs, exactly one payment per key`,
    async (_, of) => {
      const db = of();
      const payments = await paymentsTable(db);
      const run = await crashRun({
        ...db.env,
        PAYMENTS_TABLE: payments,
        RECORDS_TABLE: recordsTable(db),
      });
      const { duplicated, rows } = await tally(`${db.name} (transactional)`, db, payments, run);
      expect(duplicated.map((key) => [key, rows.get(key)])).toEqual([]);
    },
    300_000,
  );

  it(`crash, Redis (baseline): ${RUN.keys} keys, ${RUN.kills} SIGKILLs, duplicates reported`, async () => {
    const payments = await paymentsTable(postgres);
    const run = await crashRun({
      STORE: 'redis',
      REDIS_URL: testRedisUrl(),
      KEY_PREFIX: `${prefix}crash:`,
      PAYMENTS_TABLE: payments,
    });
    const { duplicated, unanswered } = await tally('Redis', postgres, payments, run);
    // Not asserted zero: this is the crash window no Redis-based layer closes. Every duplicate
    // is in it, though: one of its payments was committed by a killed app that never answered.
    expect(duplicated.filter((key) => !unanswered.includes(key))).toEqual([]);
  }, 300_000);

  describe.each([
    ['PostgreSQL', () => postgres],
    ['MariaDB', () => mariadb],
  ])('zombie, %s transactional', (_, of) => {
    let db: Database;
    let records: string;
    let payments: string;
    let a: AppProcess;
    let b: AppProcess;

    beforeAll(async () => {
      db = of();
      records = recordsTable(db);
      payments = await paymentsTable(db);
      const env = { ...db.env, PAYMENTS_TABLE: payments, RECORDS_TABLE: records };
      [a, b] = await Promise.all([start(env), start(env)]);
    }, 60_000);

    const rowsOf = async (key: string) =>
      (await db.payments(payments, key)).map(({ pid }) => ({ pid }));

    /** The store key A claimed for its request with `key`, once A inserted its payment. */
    const claimedKey = () =>
      (JSON.parse(a.events('claimed').at(-1)!.slice('EVENT '.length)) as { key: string }).key;

    /** Resolves once the record's lease has run out on the database's clock (still A's). */
    async function leaseExpired(recordKey: string): Promise<void> {
      for (;;) {
        const rows = await db.record(records, recordKey);
        expect(rows).toHaveLength(1);
        expect(rows[0].state).toBe('p'); // A neither completed nor released it
        if (rows[0].left_ms <= 0) return;
        await sleep(rows[0].left_ms + 5); // computed from the lease, then checked again
      }
    }

    /** A's request was fenced: 409, its payment rolled back, B's stays, retries replay B's. */
    async function expectHeirWins(
      key: string,
      recordKey: string,
      zombie: Promise<unknown>,
      heirText: string,
    ) {
      const answer = (await zombie) as Awaited<ReturnType<typeof post>>;
      expect(answer.status).toBe(409);
      await a.waitForLine(new RegExp(`^EVENT .*"type":"fenced".*"${escape(recordKey)}"`));
      expect(await rowsOf(key)).toEqual([{ pid: b.pid }]);
      for (const app of [a, b]) {
        const replay = await post(app.url, '/payments', { key, body: { amount: 100 } });
        expect(replay.status).toBe(201);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.text).toBe(heirText);
      }
      expect(await rowsOf(key)).toEqual([{ pid: b.pid }]);
    }

    it('SIGSTOP: a frozen owner is taken over after its lease; on SIGCONT its payment rolls back and its client gets 409', async () => {
      const key = `zombie-${randomUUID()}`;
      const zombie = post(a.url, '/payments', {
        key,
        body: { amount: 100 },
        headers: { 'x-hold-ms': '2000' }, // A is stopped within it
      });
      await a.waitForLine(new RegExp(`^INSERTED ${key} `));
      process.kill(a.pid, 'SIGSTOP'); // inside its open transaction; no heartbeat can run now
      try {
        const recordKey = claimedKey();
        await leaseExpired(recordKey);
        const heir = await post(b.url, '/payments', {
          key,
          body: { amount: 100 },
          headers: { 'x-hold-ms': '0' },
        });
        expect(heir.status).toBe(201);
        expect(heir.headers.get('idempotent-replayed')).toBeNull();
        expect(heir.json()).toMatchObject({ pid: b.pid });
        // B committed; A's row is still inside A's open transaction, invisible.
        expect(await rowsOf(key)).toEqual([{ pid: b.pid }]);
        process.kill(a.pid, 'SIGCONT');
        await expectHeirWins(key, recordKey, zombie, heir.text);
      } finally {
        process.kill(a.pid, 'SIGCONT');
      }
    }, 30_000);

    it('blocking step: a handler that blocks its event loop past its lease is taken over; its payment rolls back', async () => {
      const key = `blocked-${randomUUID()}`;
      // Blocks long enough for the lease to run out and B to take over and finish meanwhile.
      const zombie = post(a.url, '/payments', {
        key,
        body: { amount: 100 },
        headers: { 'x-block-ms': String(LOCK_TTL + 3_000), 'x-hold-ms': '0' },
      });
      await a.waitForLine(new RegExp(`^INSERTED ${key} `));
      const recordKey = claimedKey();
      await leaseExpired(recordKey);
      const heir = await post(b.url, '/payments', {
        key,
        body: { amount: 100 },
        headers: { 'x-hold-ms': '0' },
      });
      // Not a replay: B's claim took the lease over before A could complete.
      expect(heir.status).toBe(201);
      expect(heir.headers.get('idempotent-replayed')).toBeNull();
      expect(await rowsOf(key)).toEqual([{ pid: b.pid }]);
      await expectHeirWins(key, recordKey, zombie, heir.text);
    }, 30_000);
  });
});
