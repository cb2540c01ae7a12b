// The floor is correct for everything it does, on a throwaway redis-server: one execution under
// 20 concurrent duplicates, completion and release fenced by the owner token, a replay
// byte-for-byte the first response, and an error releasing the key. `node --test
// bench/floor/floor.test.js` (no build needed).
const { after, before, describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const Redis = require('ioredis').default;
const { agent, control, post, startApp } = require('../lib/apps');
const { stopAll } = require('../lib/procs');
const { startRedis } = require('../lib/setup');
const { payment } = require('../payload');
const { createFloor, FloorConflict } = require('./floor');

const PREFIX = 'floor-test:';
let server;
const clients = [];
const client = (server) => {
  const redis = new Redis(server.url);
  clients.push(redis);
  return redis;
};

before(async () => {
  server = await startRedis();
});
after(() => {
  clients.forEach((redis) => redis.disconnect());
  agent.destroy();
  stopAll();
});

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

describe('run(key, fn)', () => {
  test(
    'runs fn once under 20 concurrent duplicates, each on its own connection',
    LIMIT,
    async () => {
      const floors = Array.from({ length: 20 }, () =>
        createFloor(client(server), { prefix: PREFIX }),
      );
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

  test('an error releases the key: the next call runs fn again', async () => {
    const floor = createFloor(client(server), { prefix: PREFIX });
    const key = randomUUID();
    const failure = new Error('no');
    await assert.rejects(
      floor.run(key, async () => {
        throw failure;
      }),
      (error) => error === failure,
    );
    assert.equal(await clients[0].exists(PREFIX + key), 0);
    assert.deepEqual(await floor.run(key, async () => ({ again: true })), { again: true });
  });
});

describe('fencing', () => {
  test('a caller whose lease ran out neither completes nor releases the new owner’s claim', async () => {
    const redis = client(server);
    const floor = createFloor(redis, { prefix: PREFIX });
    const key = randomUUID();
    const [first, second] = [floor.token(), floor.token()];
    assert.equal(await floor.claim(key, first), null);
    // The lease running out, without waiting for it: the pending record goes away.
    await redis.del(PREFIX + key);
    assert.equal(await floor.claim(key, second), null);

    assert.equal(await floor.complete(key, first, '{"late":true}'), false);
    assert.equal(await floor.release(key, first), false);
    assert.equal(await redis.get(PREFIX + key), second);

    assert.equal(await floor.complete(key, second, '{"owner":2}'), true);
    assert.equal(await floor.release(key, second), false, 'a completed record is not released');
    assert.equal(await floor.claim(key, floor.token()), '{"owner":2}');
  });
});

describe('the HTTP interceptor (NestJS 11, Express)', () => {
  let app;
  before(async () => {
    const lane = {
      id: 'floor-test',
      library: 'floor',
      kind: 'express',
      store: 'redis',
      variant: [],
    };
    app = await startApp(lane, { redisUrl: server.url });
  });
  const send = (path, key, body = { amount: 100 }) =>
    post(`${app.base}${path}`, body, key ? { 'idempotency-key': key } : {});

  test(
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

  test('a replay is byte-for-byte the first response, which is what the plain route sends', async () => {
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
    const stored = await clients[0].getBuffer(`bench:floor-test:${key}`);
    assert.ok(stored.equals(Buffer.concat([Buffer.from('201'), first.body])));
  });

  test('an error releases the key: a retry runs the handler again', async () => {
    const key = randomUUID();
    const { executions } = await control(app, '/stats');
    assert.equal((await send('/fail', key)).status, 503);
    assert.equal(await clients[0].exists(`bench:floor-test:${key}`), 0);
    assert.equal((await send('/fail', key)).status, 503);
    assert.equal((await control(app, '/stats')).executions - executions, 2);
  });
});
