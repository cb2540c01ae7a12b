// The floor is correct for everything it does, on each of its stores: a throwaway redis-server,
// and the bench's PostgreSQL and MariaDB/MySQL (bench/lib/config.js: BENCH_POSTGRES_URL,
// BENCH_MYSQL_URL, else the database `test` on 127.0.0.1; tables of this test's own, dropped at
// the end; a server that does not answer skips its tests, or fails them with CI=true). One
// execution under 20 concurrent duplicates, completion and release fenced by the owner token, an
// expired claim or outcome taken over (by one of 20 concurrent claims), a replay byte-for-byte
// the first response, and an error releasing the key. `node --test bench/floor/floor.test.js`
// (no build needed).
const { after, before, describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const Redis = require('ioredis').default;
const { agent, control, post, startApp, stopApp, tableOf } = require('../lib/apps');
const { POSTGRES_URL, MYSQL_URL } = require('../lib/config');
const { stopAll } = require('../lib/procs');
const { startRedis } = require('../lib/setup');
const { payment } = require('../payload');
const { createFloor, FloorConflict } = require('./floor');
const { createSqlFloor } = require('./floor-sql');

const PREFIX = 'floor-test:';
const TABLE = `floor_test_${process.pid}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Direct access to a SQL store's rows, beside the floor: to expire a row, and to read one. */
const SQL = {
  postgres: {
    url: POSTGRES_URL,
    connect() {
      const { Pool } = require('pg');
      const pool = new Pool({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2_000 });
      return {
        rows: async (text, values) => (await pool.query(text, values)).rows,
        end: () => pool.end(),
      };
    },
    expire: (t) =>
      `UPDATE "${t}" SET expires_at = statement_timestamp() - interval '1 second' WHERE key = $1`,
    read: (t) => `SELECT token, outcome FROM "${t}" WHERE key = $1`,
    drop: (t) => `DROP TABLE IF EXISTS "${t}"`,
  },
  mysql: {
    url: MYSQL_URL,
    connect() {
      const pool = require('mysql2/promise').createPool({ uri: MYSQL_URL, connectTimeout: 2_000 });
      return {
        rows: async (text, values) => (await pool.query(text, values))[0],
        end: () => pool.end(),
      };
    },
    expire: (t) =>
      `UPDATE \`${t}\` SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE \`key\` = ?`,
    read: (t) => `SELECT token, outcome FROM \`${t}\` WHERE \`key\` = ?`,
    drop: (t) => `DROP TABLE IF EXISTS \`${t}\``,
  },
};

/**
 * One store under test: `floor(options)` a floor on a connection of its own, `expire(key)` its
 * lease or retention running out (Redis: the key gone; SQL: the row's expires_at past, for a
 * claim to take over), `record(key, where)` what the store holds for the key (a token or an
 * outcome; null when none), where `where` is the Redis prefix or the table (default this test's).
 */
function harness(store) {
  const h = { store, skip: undefined, closers: [] };
  const sql = SQL[store];
  let server;
  let db;
  h.open = async () => {
    if (store === 'redis') {
      server = await startRedis();
      db = new Redis(server.url);
      h.appEnv = { redisUrl: server.url };
      return;
    }
    db = sql.connect();
    try {
      await db.rows(sql.drop(TABLE));
    } catch (error) {
      if (process.env.CI === 'true') throw error;
      h.skip = `${store} does not answer at ${sql.url} (${error.message})`;
      return;
    }
    h.appEnv = { postgresUrl: POSTGRES_URL, mysqlUrl: MYSQL_URL };
    // The table, once, before floors open on it concurrently.
    await h.floor();
  };
  h.floor = async (options = {}) => {
    if (store === 'redis') {
      const redis = new Redis(server.url);
      h.closers.push(() => redis.disconnect());
      return createFloor(redis, { prefix: PREFIX, ...options });
    }
    const floor = await createSqlFloor(store, sql.url, TABLE, options);
    h.closers.push(() => floor.close());
    return floor;
  };
  h.expire = (key) =>
    store === 'redis' ? db.del(PREFIX + key) : db.rows(sql.expire(TABLE), [key]);
  h.record = async (key, where = store === 'redis' ? PREFIX : TABLE) => {
    if (store === 'redis') return db.get(where + key);
    const [row] = await db.rows(sql.read(where), [key]);
    return row ? (row.token ?? row.outcome) : null;
  };
  h.close = async (tables = []) => {
    await Promise.all(h.closers.map((close) => close()));
    if (store !== 'redis' && !h.skip) {
      for (const table of [TABLE, ...tables]) await db.rows(sql.drop(table));
    }
    await (store === 'redis' ? db?.disconnect() : db?.end());
  };
  return h;
}

/** A promise and the function that settles it. */
function gate() {
  let open;
  const opened = new Promise((resolve) => (open = resolve));
  return { opened, open };
}

/** Resolves once `n` of `promises` settled as `refused` says (the others may still run). */
function whenRefused(promises, n, refused) {
  const { opened, open } = gate();
  let count = 0;
  for (const promise of promises) {
    promise.then(
      (value) => refused(value) && ++count === n && open(),
      (error) => refused(error) && ++count === n && open(),
    );
  }
  return opened;
}
const LIMIT = { timeout: 10_000 };

const NAMES = { redis: 'Redis', postgres: 'PostgreSQL', mysql: 'MariaDB/MySQL' };

for (const store of ['redis', 'postgres', 'mysql']) {
  describe(`the floor on ${NAMES[store]}`, () => {
    const h = harness(store);
    const lane = {
      id: `floor-test-${store}`,
      library: 'floor',
      kind: 'express',
      store,
      variant: [],
    };
    before(() => h.open());
    after(() => h.close([tableOf(lane)]));
    /** A test of this store, skipped when its server does not answer. */
    const it = (name, options, fn = options) =>
      test(name, fn === options ? {} : options, (t) => (h.skip ? t.skip(h.skip) : fn(t)));

    describe('run(key, fn)', () => {
      it(
        'runs fn once under 20 concurrent duplicates, each on its own connection',
        LIMIT,
        async () => {
          const floors = await Promise.all(Array.from({ length: 20 }, () => h.floor()));
          const key = randomUUID();
          const { opened, open } = gate();
          let runs = 0;
          const calls = floors.map((floor) =>
            floor.run(key, async () => {
              runs++;
              await opened;
              return payment(7);
            }),
          );
          // Every duplicate but the one running is refused while fn still runs.
          await whenRefused(calls, 19, (outcome) => outcome instanceof FloorConflict);
          assert.equal(runs, 1);
          open();
          const settled = await Promise.allSettled(calls);
          assert.equal(runs, 1);
          assert.equal(settled.filter((s) => s.status === 'fulfilled').length, 1);
          const rejected = settled.filter((s) => s.status === 'rejected');
          assert.equal(rejected.length, 19);
          for (const { reason } of rejected) assert.ok(reason instanceof FloorConflict);
          // Then a duplicate replays the stored result without running fn.
          assert.deepEqual(await floors[3].run(key, () => runs++), payment(7));
          assert.equal(runs, 1);
        },
      );

      it('an error releases the key: the next call runs fn again', async () => {
        const floor = await h.floor();
        const key = randomUUID();
        const failure = new Error('no');
        await assert.rejects(
          floor.run(key, async () => {
            throw failure;
          }),
          (error) => error === failure,
        );
        assert.equal(await h.record(key), null);
        assert.deepEqual(await floor.run(key, async () => ({ again: true })), { again: true });
      });

      it('an expired outcome is taken over: the next call runs fn again', async () => {
        const floor = await h.floor();
        const key = randomUUID();
        assert.deepEqual(await floor.run(key, async () => 1), 1);
        assert.deepEqual(await floor.run(key, async () => 2), 1);
        await h.expire(key);
        assert.deepEqual(await floor.run(key, async () => 3), 3);
        assert.deepEqual(await floor.run(key, async () => 4), 3);
      });
    });

    describe('leases and fencing', () => {
      it('a claim holds its key for its lease, then another claim takes it', async () => {
        const floor = await h.floor({ leaseMs: 300 });
        const key = randomUUID();
        const first = floor.token();
        assert.equal(await floor.claim(key, first), null);
        const held = await floor.claim(key, floor.token());
        assert.ok(floor.pending(held));
        await sleep(400);
        assert.equal(await floor.claim(key, floor.token()), null);
        assert.equal(await floor.complete(key, first, '"late"'), false);
      });

      it('20 concurrent claims of an expired claim: exactly one takes it over', LIMIT, async () => {
        const floors = await Promise.all(Array.from({ length: 20 }, () => h.floor()));
        const key = randomUUID();
        assert.equal(await floors[0].claim(key, floors[0].token()), null);
        await h.expire(key);
        const tokens = floors.map((floor) => floor.token());
        const records = await Promise.all(floors.map((floor, i) => floor.claim(key, tokens[i])));
        const winners = records.flatMap((record, i) => (record === null ? [i] : []));
        assert.equal(winners.length, 1);
        assert.ok(records.every((record) => record === null || floors[0].pending(record)));
        assert.equal(await h.record(key), tokens[winners[0]]);
      });

      it('a caller whose lease ran out neither completes nor releases the new owner’s claim', async () => {
        const floor = await h.floor();
        const key = randomUUID();
        const [first, second] = [floor.token(), floor.token()];
        assert.equal(await floor.claim(key, first), null);
        // The lease running out, without waiting for it.
        await h.expire(key);
        assert.equal(await floor.claim(key, second), null);

        assert.equal(await floor.complete(key, first, '{"late":true}'), false);
        assert.equal(await floor.release(key, first), false);
        assert.equal(await h.record(key), second);

        assert.equal(await floor.complete(key, second, '{"owner":2}'), true);
        assert.equal(await floor.release(key, second), false, 'a completed record is not released');
        assert.equal(await floor.complete(key, second, '{"again":3}'), false);
        assert.equal(await floor.claim(key, floor.token()), '{"owner":2}');
      });
    });

    describe('the HTTP interceptor (NestJS 11, Express)', () => {
      let app;
      before(async () => {
        if (!h.skip) app = await startApp(lane, h.appEnv);
      });
      after(() => app && stopApp(app));
      const send = (path, key, body = { amount: 100 }) =>
        post(`${app.base}${path}`, body, key ? { 'idempotency-key': key } : {});
      const stored = (key) =>
        h.record(key, store === 'redis' ? `bench:${lane.id}:` : tableOf(lane));

      it(
        '20 concurrent duplicates: one runs the handler, 19 get 409 while it runs',
        LIMIT,
        async () => {
          const key = randomUUID();
          const requests = Array.from({ length: 20 }, () => send('/hold', key, {}));
          await whenRefused(requests, 19, (response) => response?.status === 409);
          await control(app, '/release', { key });
          const responses = await Promise.all(requests);
          assert.deepEqual(responses.map((r) => r.status).sort(), [201, ...Array(19).fill(409)]);
          assert.equal(JSON.parse(responses.find((r) => r.status === 201).body).held, key);
        },
      );

      it('a replay is byte-for-byte the first response, which is what the plain route sends', async () => {
        const key = randomUUID();
        const first = await send('/idempotent', key);
        const replay = await send('/idempotent', key);
        const plain = await send('/baseline');
        assert.equal(first.status, 201);
        assert.equal(replay.status, 201);
        assert.ok(first.body.equals(plain.body));
        assert.ok(replay.body.equals(first.body));
        assert.equal(replay.headers['content-type'], first.headers['content-type']);
        assert.equal(first.headers['content-type'], plain.headers['content-type']);
        assert.equal(await stored(key), `201${first.body}`);
      });

      it('an error releases the key: a retry runs the handler again', async () => {
        const key = randomUUID();
        const { executions } = await control(app, '/stats');
        assert.equal((await send('/fail', key)).status, 503);
        assert.equal(await stored(key), null);
        assert.equal((await send('/fail', key)).status, 503);
        assert.equal((await control(app, '/stats')).executions - executions, 2);
      });
    });
  });
}

after(() => {
  agent.destroy();
  stopAll();
});
