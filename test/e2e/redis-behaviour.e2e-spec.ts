import Redis from 'ioredis';
import { IdempotencyEvent, IdempotencyStore, RedisIdempotencyStore } from '../../lib';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import {
  findFreePort,
  RedisClusterProcesses,
  RedisProcess,
  startRedisCluster,
  startRedisServer,
} from '../support/redis-server';
import { readRecord, rewriteMeta } from '../support/records';
import { startTcpProxy } from '../support/tcp-proxy';
import { PLATFORMS, post, startTestApp, TestApp } from '../support/test-app';

let markers = 0;

/**
 * Round trips the app made during `action`, by command, watched with MONITOR: every command a
 * client sent, but those a script ran and the ECHO that marks the end (MONITOR reports commands
 * in the order Redis ran them: once the marker shows up, every command before it has).
 */
async function roundTrips(
  monitor: Redis,
  client: Redis,
  action: () => Promise<unknown>,
): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  const marker = `end-${++markers}`;
  let ended!: () => void;
  const end = new Promise<void>((resolve) => (ended = resolve));
  const count = (_time: string, args: string[], source: string) => {
    const name = args[0].toLowerCase();
    if (name === 'echo' && args[1] === marker) ended();
    else if (source !== 'lua') seen[name] = (seen[name] ?? 0) + 1;
  };
  monitor.on('monitor', count);
  try {
    await action();
    await client.echo(marker);
    await end;
  } finally {
    monitor.off('monitor', count);
  }
  return seen;
}

/** The client's next 'ready' (events.once would reject on the reconnection errors before it). */
const readyEvent = (client: { once(event: 'ready', listener: () => void): unknown }) =>
  new Promise<void>((resolve) => client.once('ready', () => resolve()));

let seq = 0;
const newKey = () => `redis-${Date.now()}-${++seq}`;

describe.each(PLATFORMS)('Redis behaviour on %s', (platform) => {
  describe('on a private redis-server', () => {
    let server: RedisProcess;
    let client: Redis;
    let monitor: Redis;
    let t: TestApp;

    beforeAll(async () => {
      server = await startRedisServer();
      client = new Redis(server.url);
      // A MONITOR that never reconnects: the last test stops this server, and ioredis 5, once it
      // reconnected a monitoring client, took the feed for replies and threw ('Command queue
      // state error') about one run in six.
      monitor = await new Redis(server.url, {
        retryStrategy: () => null,
        lazyConnect: true,
      }).monitor();
      t = await startTestApp(platform, { redis: server.url });
      await post(t.url, '/payments', { key: 'warm-up', body: {} }); // loads the scripts
    });
    afterAll(async () => {
      monitor.disconnect();
      await t.close();
      client.disconnect();
      await server.stop();
    });

    it('claims with one SET and completes with one script; replays, 409s and 422s are one SET', async () => {
      const key = newKey();
      const trips = (action: () => Promise<unknown>) => roundTrips(monitor, client, action);
      // The listing entry's HSET follows the claim without being waited for.
      expect(await trips(() => post(t.url, '/payments', { key, body: { a: 1 } }))).toEqual({
        set: 1,
        hset: 1,
        evalsha: 1,
      });
      expect(await trips(() => post(t.url, '/payments', { key, body: { a: 1 } }))).toEqual({
        set: 1,
      });
      expect(await trips(() => post(t.url, '/payments', { key, body: { a: 2 } }))).toEqual({
        set: 1,
      });
      const started = t.executions.nextStarted();
      // The slow claim's listing entry leaves the app after its handler starts: not the 409's.
      const listed = new Promise<void>((resolve) => {
        const seen = (_time: string, args: string[]) => {
          if (args[0].toLowerCase() !== 'hset') return;
          monitor.off('monitor', seen);
          resolve();
        };
        monitor.on('monitor', seen);
      });
      const slow = post(t.url, '/payments/slow', { key, body: {} });
      const release = await started;
      await listed;
      expect(
        await trips(async () => {
          expect((await post(t.url, '/payments/slow', { key, body: {} })).status).toBe(409);
        }),
      ).toEqual({ set: 1 });
      release();
      await slow;
    });

    it('survives SCRIPT FLUSH: scripts reload transparently', async () => {
      await client.script('FLUSH');
      const key = newKey();
      expect((await post(t.url, '/payments', { key, body: {} })).status).toBe(201);
      const replay = await post(t.url, '/payments', { key, body: {} });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    });

    it('stores one string per record, under a hashed key with a TTL', async () => {
      const key = newKey();
      await post(t.url, '/payments', { key, body: { amount: 3 } });
      const [record] = t.executions.ofType('completed').slice(-1);
      expect(record.key).toMatch(/^idempotency:\{[A-Za-z0-9_-]{22}\}$/);
      expect(record.key).not.toContain(key);
      expect(await client.type(record.key!)).toBe('string');
      const ttl = await client.pttl(record.key!);
      expect(ttl).toBeGreaterThan(86_000_000);
      expect(ttl).toBeLessThanOrEqual(86_400_000);
      // Completed: state, fingerprint, meta and body; the owner token is gone.
      const stored = await readRecord(client, record.key!);
      expect(stored).toEqual({
        state: 'c',
        fingerprint: expect.stringMatching(/^[A-Za-z0-9_-]{22,}$/),
        meta: expect.any(String),
        body: expect.any(Buffer),
      });
      // The JSON content type Express and Fastify set anyway is not stored with every record.
      expect(JSON.parse(stored?.state === 'c' ? stored.meta : '')).toEqual({
        k: 'j',
        s: 201,
        h: { location: '/payments/42', etag: '"v1"', 'cache-control': 'no-store' },
      });
      expect(JSON.parse(String(stored?.state === 'c' && stored.body))).toMatchObject({ amount: 3 });
    });

    it('answers with the handler’s response when Redis dies mid-request, and recovers when it restarts', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const pending = post(t.url, '/payments/slow', { key, body: { hold: true } });
      const release = await started;
      client.disconnect();
      await server.stop();
      release();
      const response = await pending;
      expect(response.status).toBe(201);
      expect(response.json()).toEqual({ run: expect.any(Number) });
      expect(t.executions.ofType('completion_failed')).toHaveLength(1);
      // The app keeps serving: keyed requests fail closed, unkeyed ones run.
      expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(503);
      expect((await post(t.url, '/payments', { body: {} })).status).toBe(201);

      // Redis restarts empty (no scripts cached): the app reconnects and reloads them itself.
      const appClient = (t.app.get(IdempotencyStore) as RedisIdempotencyStore).client;
      const ready = readyEvent(appClient);
      server = await startRedisServer({ port: server.port });
      client = new Redis(server.url);
      await ready;
      const again = newKey();
      expect((await post(t.url, '/payments', { key: again, body: {} })).status).toBe(201);
      const replay = await post(t.url, '/payments', { key: again, body: {} });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    });
  });

  describe('on the shared Redis', () => {
    const prefix = uniquePrefix(`redis-${platform}`);
    let t: TestApp;
    let inspect: Redis;

    beforeAll(async () => {
      inspect = inspectionClient();
      t = await startTestApp(platform, { redis: testRedisUrl(), keyPrefix: prefix });
    });
    afterAll(async () => {
      await t.close();
      await deleteKeysUnder(inspect, prefix);
      await inspect.quit();
    });

    it('renews the lease while a handler outlives lockTtl (heartbeat)', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const first = post(t.url, '/payments/short-lease', { key });
      const release = await started;
      const [claimed] = t.executions.ofType('claimed').slice(-1);
      // Let two and a half leases' worth of time pass: without the heartbeat the key would be free.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect((await readRecord(inspect, claimed.key!))?.state).toBe('p');
      expect(await inspect.pttl(claimed.key!)).toBeLessThanOrEqual(1_000);
      expect((await post(t.url, '/payments/short-lease', { key })).status).toBe(409);
      release();
      expect((await first).status).toBe(201);
      expect(t.executions.ofType('lease_lost')).toHaveLength(0);
      expect(t.executions.count('short-lease')).toBe(1);
    });

    it('filters headers again on replay: a tampered record cannot set cookies', async () => {
      const key = newKey();
      await post(t.url, '/payments', { key, body: { amount: 9 } });
      const [completed] = t.executions.ofType('completed').slice(-1);
      const record = await readRecord(inspect, completed.key!);
      const meta = JSON.parse(record?.state === 'c' ? record.meta : '{}');
      meta.h = { ...meta.h, 'set-cookie': 'session=attacker', 'x-evil': '1' };
      await rewriteMeta(inspect, completed.key!, JSON.stringify(meta));
      const replay = await post(t.url, '/payments', { key, body: { amount: 9 } });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('set-cookie')).toBeNull();
      expect(replay.headers.get('x-evil')).toBeNull();
      expect(replay.headers.get('location')).toBe('/payments/42');
    });

    it('reports lease_lost when the heartbeat finds the lease gone', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const first = post(t.url, '/payments/short-lease', { key });
      const release = await started;
      const [claimed] = t.executions.ofType('claimed').slice(-1);
      const lost = t.executions.waitFor('lease_lost');
      await inspect.del(claimed.key!);
      await lost; // the next heartbeat (every 333 ms) finds the record gone
      release();
      expect((await first).status).toBe(201);
      expect(t.executions.ofType('fenced').map((e) => e.key)).toContain(claimed.key);
    });

    it('fences a handler that lost its lease: the request that took over keeps its stored result', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const zombie = post(t.url, '/payments/slow', { key, body: { hold: true } });
      const releaseZombie = await started;
      const [claimed] = t.executions.ofType('claimed').slice(-1);
      // The lease ends while the zombie still runs (as after a long GC pause or a network split).
      await inspect.del(claimed.key!);

      const heirStarted = t.executions.nextStarted();
      const heir = post(t.url, '/payments/slow', { key, body: { hold: true } });
      (await heirStarted)();
      const heirResponse = await heir;
      expect(heirResponse.status).toBe(201);

      releaseZombie();
      const zombieResponse = await zombie;
      expect(zombieResponse.status).toBe(201); // the client still gets what its handler did
      expect(zombieResponse.text).not.toBe(heirResponse.text);
      expect(t.executions.ofType('fenced').map((e: IdempotencyEvent) => e.key)).toContain(
        claimed.key,
      );

      const replay = await post(t.url, '/payments/slow', { key, body: { hold: true } });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(heirResponse.text);
    });

    it('runs exactly once under 200 concurrent same-key requests spread over two app instances', async () => {
      const other = await startTestApp(platform === 'express' ? 'fastify' : 'express', {
        redis: testRedisUrl(),
        keyPrefix: prefix,
      });
      try {
        const key = newKey();
        const body = { amount: 5, currency: 'EUR' };
        const responses = await Promise.all(
          Array.from({ length: 200 }, (_, i) =>
            post(i % 2 ? other.url : t.url, '/payments/validated', { key, body }),
          ),
        );
        const executions = t.executions.count('validated') + other.executions.count('validated');
        expect(executions).toBe(1);
        const created = responses.filter((r) => r.status === 201);
        const conflicts = responses.filter((r) => r.status === 409);
        expect(created.length + conflicts.length).toBe(200);
        const fresh = created.filter((r) => r.headers.get('idempotent-replayed') !== 'true');
        expect(fresh).toHaveLength(1);
        for (const replay of created) expect(replay.text).toBe(fresh[0].text);
      } finally {
        await other.close();
      }
    });
  });

  describe('on a 3-master Redis Cluster the module connects to itself', () => {
    let cluster: RedisClusterProcesses;
    let t: TestApp;

    beforeAll(async () => {
      cluster = await startRedisCluster({ masters: 3 });
      t = await startTestApp(platform, { redis: { clusterNodes: cluster.nodes } });
    }, 60_000);
    afterAll(async () => {
      await t?.close();
      await cluster?.stop();
    });

    it('claims, replays and conflicts across slots, exactly once per key', async () => {
      const keys = Array.from({ length: 20 }, () => newKey());
      for (const key of keys) {
        const first = await post(t.url, '/payments', { key, body: { key } });
        const replay = await post(t.url, '/payments', { key, body: { key } });
        expect(first.status).toBe(201);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.bytes.equals(first.bytes)).toBe(true);
      }
      expect(t.executions.count('create')).toBe(20);
      const key = newKey();
      const responses = await Promise.all(
        Array.from({ length: 50 }, () =>
          post(t.url, '/payments/validated', { key, body: { amount: 1, currency: 'EUR' } }),
        ),
      );
      expect(t.executions.count('validated')).toBe(1);
      expect(responses.every((r) => r.status === 201 || r.status === 409)).toBe(true);
    });
  });

  describe('when Redis is unreachable or hangs', () => {
    it('boots, answers keyed requests 503 with Retry-After without running them, and serves the rest', async () => {
      const port = await findFreePort(); // nothing listens there
      const t = await startTestApp(platform, {
        redis: `redis://127.0.0.1:${port}`,
        storeTimeout: 300,
      });
      try {
        const response = await post(t.url, '/payments', { key: newKey(), body: {} });
        expect(response.status).toBe(503);
        expect(response.headers.get('retry-after')).toBe('1');
        expect(response.json()).toMatchObject({ code: 'IDEMPOTENCY_STORE_UNAVAILABLE' });
        expect(t.executions.count('create')).toBe(0);
        expect(t.executions.ofType('store_error')).toHaveLength(1);
        expect((await post(t.url, '/payments', { body: {} })).status).toBe(201);
        expect((await post(t.url, '/payments/plain', { key: newKey() })).status).toBe(201);
      } finally {
        await t.close();
      }
    });

    it('runs the handler unprotected with failOpen: true', async () => {
      const port = await findFreePort();
      const t = await startTestApp(platform, {
        redis: `redis://127.0.0.1:${port}`,
        storeTimeout: 300,
        failOpen: true,
      });
      try {
        const response = await post(t.url, '/payments', { key: newKey(), body: {} });
        expect(response.status).toBe(201);
        expect(t.executions.count('create')).toBe(1);
        expect(t.executions.ofType('store_error')).toHaveLength(1);
      } finally {
        await t.close();
      }
    });

    it('turns a Redis that stops answering into a quick 503, and frees a claim that lands late', async () => {
      const server = await startRedisServer();
      const t = await startTestApp(platform, { redis: server.url, storeTimeout: 300 });
      try {
        expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(201);
        process.kill(server.pid, 'SIGSTOP'); // the connection stays open, nothing answers
        const started = Date.now();
        const key = newKey();
        const response = await post(t.url, '/payments', { key, body: {} });
        expect(response.status).toBe(503);
        expect(Date.now() - started).toBeLessThan(2_000);
        expect(t.executions.count('create')).toBe(1);
        // The claim sent before the freeze runs when Redis resumes; nobody runs the handler for
        // it, so the interceptor releases it rather than leave the key pending for lockTtl.
        const released = t.executions.waitFor('released', 1);
        process.kill(server.pid, 'SIGCONT');
        await released;
        expect((await post(t.url, '/payments', { key, body: {} })).status).toBe(201);
        expect(t.executions.count('create')).toBe(2);
      } finally {
        process.kill(server.pid, 'SIGCONT');
        await t.close();
        await server.stop();
      }
    });

    it('frees a claim whose reply was lost with the connection, once it lands again', async () => {
      // The claim reached Redis and claimed the key; its reply died with the connection.
      // ioredis sends it again on reconnecting, and the claim, with its own owner token, must
      // be recognised as the same claim: released, not left in progress for lockTtl.
      const server = await startRedisServer();
      const proxy = await startTcpProxy({ host: '127.0.0.1', port: server.port });
      const t = await startTestApp(platform, {
        redis: `redis://127.0.0.1:${proxy.port}`,
        storeTimeout: 300,
      });
      try {
        expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(201);
        const key = newKey();
        const releasedBefore = t.executions.ofType('released').length;
        proxy.cutOnNextReply();
        const response = await post(t.url, '/payments', { key, body: {} });
        // Sent again within storeTimeout, the claim is the request's own: the handler runs. Past
        // it, the request answered 503, and the claim is released when it lands.
        expect([201, 503]).toContain(response.status);
        if (response.status === 503) {
          const missing = releasedBefore + 1 - t.executions.ofType('released').length;
          if (missing > 0) await t.executions.waitFor('released', missing);
        }
        expect((await post(t.url, '/payments', { key, body: {} })).status).toBe(201);
        expect(t.executions.count('create')).toBe(2);
      } finally {
        await t.close();
        await proxy.close();
        await server.stop();
      }
    });

    it('shuts down within seconds when Redis stops answering', async () => {
      const server = await startRedisServer();
      const t = await startTestApp(platform, { redis: server.url, waitTimeout: 100 });
      try {
        const key = newKey();
        // A request that holds its key, and a duplicate that waits for it (which opens the
        // subscriber connection) until waitTimeout.
        const held = post(t.url, '/payments/wait', { key, body: { hold: true } });
        const release = await t.executions.nextStarted();
        expect((await post(t.url, '/payments/wait', { key, body: { hold: true } })).status).toBe(
          409,
        );
        expect(t.executions.ofType('waiting')).toHaveLength(1);
        release();
        expect((await held).status).toBe(201);
        process.kill(server.pid, 'SIGSTOP'); // connections stay open, QUIT is never answered
        const started = Date.now();
        await t.close();
        expect(Date.now() - started).toBeLessThan(5_000);
      } finally {
        process.kill(server.pid, 'SIGCONT');
        await server.stop();
      }
    });

    it('boots at once with a lazyConnect client of yours, which connects on first use', async () => {
      const server = await startRedisServer();
      const client = new Redis(server.url, { lazyConnect: true });
      const started = Date.now();
      const t = await startTestApp(platform, { redis: client, storeTimeout: 3_000 });
      try {
        expect(Date.now() - started).toBeLessThan(2_500);
        expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(201);
        expect(client.status).toBe('ready');
      } finally {
        await t.close();
        client.disconnect();
        await server.stop();
      }
    });

    it('recovers once Redis comes back', async () => {
      const port = await findFreePort();
      const t = await startTestApp(platform, {
        redis: `redis://127.0.0.1:${port}`,
        storeTimeout: 300,
      });
      let server: RedisProcess | undefined;
      try {
        expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(503);
        const client = (t.app.get(IdempotencyStore) as RedisIdempotencyStore).client;
        const ready = readyEvent(client);
        server = await startRedisServer({ port });
        await ready; // ioredis reconnects on its own, with backoff
        expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(201);
      } finally {
        await t.close();
        await server?.stop();
      }
    });
  });
});

describe('RedisIdempotencyStore sending its scripts on one node', () => {
  const prefix = uniquePrefix('sending');
  let client: Redis;
  let inspect: Redis;
  let store: RedisIdempotencyStore;
  const claim = (key: string) =>
    store.claim(key, { token: 'owner', fingerprint: 'fp', leaseMs: 60_000 });

  beforeAll(async () => {
    client = new Redis(testRedisUrl(), { keyPrefix: prefix });
    inspect = inspectionClient();
    await client.ping();
    store = new RedisIdempotencyStore(client);
  });

  afterAll(async () => {
    await deleteKeysUnder(inspect, prefix);
    client.disconnect();
    inspect.disconnect();
  });

  it('holds the commands of one event-loop turn, and sends them together when it ends', async () => {
    const socket = client.stream;
    const claims = Array.from({ length: 20 }, (_, i) => claim(`{turn-${i}}`));
    // All 20 are buffered on the corked socket, none written yet.
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBeGreaterThan(20 * 40);
    expect(await Promise.all(claims)).toEqual(claims.map(() => ({ status: 'claimed' })));
    // Their listing entries (HSET), sent as the replies came in, are held until that turn ends.
    expect(socket.writableCorked).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(socket.writableCorked).toBe(0);
  });

  it('sends the turn’s commands while a test fakes the timers', async () => {
    jest.useFakeTimers();
    try {
      await expect(claim('{fake-timers}')).resolves.toEqual({ status: 'claimed' });
    } finally {
      jest.useRealTimers();
    }
  });

  it('puts the keys under the client’s keyPrefix', async () => {
    await claim('{prefixed}');
    expect(await inspect.exists(`${prefix}{prefixed}`)).toBe(1);
    expect(await inspect.exists('{prefixed}')).toBe(0);
  });

  it('sends a command at once while the client is not ready (ioredis queues it)', async () => {
    const fresh = new Redis(testRedisUrl(), { keyPrefix: prefix, lazyConnect: true });
    try {
      const late = new RedisIdempotencyStore(fresh);
      const result = late.claim('{queued}', { token: 't', fingerprint: '', leaseMs: 60_000 });
      expect(fresh.stream?.writableCorked ?? 0).toBe(0);
      await expect(result).resolves.toEqual({ status: 'claimed' });
    } finally {
      fresh.disconnect();
    }
  });
});
