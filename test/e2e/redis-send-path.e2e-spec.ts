import Redis, { RedisOptions } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { RedisProcess, startRedisServer } from '../support/redis-server';
import { setTimeout as realSetTimeout } from 'node:timers';

/** The direct, corked send path of the Redis store (single node). */

type Outcome =
  { state: 'fulfilled'; value: unknown } | { state: 'rejected'; error: Error } | { state: 'hung' };

function settleWithin(promise: Promise<unknown>, ms: number): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<Outcome>((resolve) => {
    timer = setTimeout(() => resolve({ state: 'hung' }), ms);
  });
  return Promise.race([
    promise.then(
      (value): Outcome => ({ state: 'fulfilled', value }),
      (error: Error): Outcome => ({ state: 'rejected', error }),
    ),
    hung,
  ]).finally(() => clearTimeout(timer));
}

const LEASE = 60_000;
const TTL = 60_000;

function makeClient(url: string, options: RedisOptions = {}): Redis {
  const client = new Redis(url, options);
  client.on('error', () => {});
  return client;
}

const clients: Redis[] = [];
const servers: RedisProcess[] = [];
function track<T extends Redis>(client: T): T {
  clients.push(client);
  return client;
}

afterAll(async () => {
  await Promise.all(
    clients.map((c) => {
      if (c.status === 'end') return undefined;
      const ended = settleWithin(new Promise((r) => c.once('end', r)), 3000);
      c.disconnect();
      return ended;
    }),
  );
  await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
});

/** Deletes a suite's keys through an inspection client of its own, closed whatever happens. */
async function dropKeys(prefix: string): Promise<void> {
  const inspector = inspectionClient();
  try {
    await deleteKeysUnder(inspector, prefix);
  } finally {
    inspector.disconnect();
  }
}

async function privateServer(port?: number): Promise<RedisProcess> {
  const server = await startRedisServer(port === undefined ? {} : { port });
  servers.push(server);
  return server;
}

describe('shared Redis: values through the corked direct path', () => {
  const prefix = uniquePrefix('send-path');
  let client: Redis;
  let store: RedisIdempotencyStore;
  const k = (name: string) => `${prefix}{${name}}`;

  beforeAll(async () => {
    client = track(makeClient(testRedisUrl()));
    await client.ping();
    store = new RedisIdempotencyStore(client);
  });

  afterAll(async () => {
    await store.close();
    await dropKeys(prefix);
  });

  it('2 000 claims in one turn, each key twice: the first claims, the second sees in_progress', async () => {
    const n = 1000;
    const first = Array.from({ length: n }, (_, i) =>
      store.claim(k(`many-${i}`), { token: `a${i}`, fingerprint: `fp${i}`, leaseMs: LEASE }),
    );
    const second = Array.from({ length: n }, (_, i) =>
      store.claim(k(`many-${i}`), { token: `b${i}`, fingerprint: `fp${i}`, leaseMs: LEASE }),
    );
    const a = await Promise.all(first);
    const b = await Promise.all(second);
    expect(a.every((r) => r.status === 'claimed')).toBe(true);
    expect(b.every((r) => r.status === 'in_progress')).toBe(true);
  });

  it('2 000 claim+complete+reclaim in one turn return each key its own body', async () => {
    const n = 2000;
    const claims = Array.from({ length: n }, (_, i) =>
      store.claim(k(`cc-${i}`), { token: `t${i}`, fingerprint: `f${i}`, leaseMs: LEASE }),
    );
    const completes = Array.from({ length: n }, (_, i) =>
      store.complete(
        k(`cc-${i}`),
        `t${i}`,
        { meta: `meta-${i}`, body: Buffer.from(`body-${i}-é€😀`) },
        TTL,
      ),
    );
    const again = Array.from({ length: n }, (_, i) =>
      store.claim(k(`cc-${i}`), { token: `x${i}`, fingerprint: `f${i}`, leaseMs: LEASE }),
    );
    expect((await Promise.all(claims)).every((r) => r.status === 'claimed')).toBe(true);
    expect((await Promise.all(completes)).every((r) => r === true)).toBe(true);
    const results = await Promise.all(again);
    results.forEach((r, i) => {
      expect(r.status).toBe('completed');
      if (r.status !== 'completed') return;
      expect(r.response.meta).toBe(`meta-${i}`);
      expect(r.response.body.equals(Buffer.from(`body-${i}-é€😀`))).toBe(true);
    });
  });

  const bodies: [string, Buffer][] = [
    ['empty', Buffer.alloc(0)],
    ['NUL bytes', Buffer.from([0, 0, 0x41, 0])],
    ['CRLF and RESP lookalikes', Buffer.from('\r\n$5\r\nhello\r\n*1\r\n')],
    ['BOM', Buffer.from([0xef, 0xbb, 0xbf, 0x68, 0x69])],
    ['multi-byte UTF-8', Buffer.from('héllo wörld € 中文 😀 \u{10FFFF}')],
    ['overlong NUL (C0 80)', Buffer.from([0x61, 0xc0, 0x80, 0x62])],
    ['CESU surrogate (ED A0 80)', Buffer.from([0xed, 0xa0, 0x80])],
    ['surrogate pair as CESU', Buffer.from([0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80])],
    ['truncated sequence', Buffer.from([0x61, 0xe2, 0x82])],
    ['lone continuation', Buffer.from([0x80, 0x81])],
    ['latin-1', Buffer.from('caf\xe9', 'latin1')],
    ['0xFF 0xFE', Buffer.from([0xff, 0xfe, 0x00, 0x41])],
    ['all 256 byte values', Buffer.from(Array.from({ length: 256 }, (_, i) => i))],
    ['1 MB multi-byte UTF-8', Buffer.from('€😀é'.repeat(Math.ceil((1 << 20) / 9)))],
    [
      '1 MB binary',
      Buffer.from(Array.from({ length: 1 << 20 }, (_, i) => (i * 2654435761) >>> 24)),
    ],
    [
      '1 MB UTF-8 with one invalid byte at the end',
      Buffer.concat([Buffer.alloc(1 << 20, 0x61), Buffer.from([0xff])]),
    ],
  ];

  it.each(bodies)(
    'round-trips a %s body byte-exact (complete -> claim, inspect, watch)',
    async (name, body) => {
      const key = k(`body-${name}`);
      expect(await store.claim(key, { token: 'o', fingerprint: 'fp', leaseMs: LEASE })).toEqual({
        status: 'claimed',
      });
      const heard: (Buffer | null)[] = [];
      let heardOne!: () => void;
      const message = new Promise<void>((resolve) => (heardOne = resolve));
      const unwatch = await store.watch(key, (outcome) => {
        heard.push(outcome ? outcome.response.body : null);
        heardOne();
      });
      // A waiting duplicate: only then does complete() publish the response.
      expect(
        (await store.claim(key, { token: 'w', fingerprint: 'fp', leaseMs: LEASE, waiting: true }))
          .status,
      ).toBe('in_progress');
      expect(await store.complete(key, 'o', { meta: 'm€', body }, TTL)).toBe(true);
      const result = await store.claim(key, { token: 'p', fingerprint: 'fp', leaseMs: LEASE });
      expect(result.status).toBe('completed');
      if (result.status === 'completed') {
        expect(result.response.meta).toBe('m€');
        expect(result.response.body.length).toBe(body.length);
        expect(Buffer.compare(result.response.body, body)).toBe(0);
      }
      const inspection = await store.inspect(key);
      expect(inspection).toMatchObject({ state: 'completed', meta: 'm€', bytes: body.length });
      expect((await settleWithin(message, 5_000)).state).toBe('fulfilled');
      unwatch();
      expect(heard.length).toBe(1);
      // Over 64 KiB the message is a bare 'c' by design (lua/complete-4.lua): waiters re-claim.
      if (body.length > 65536) expect(heard[0]).toBeNull();
      else expect(Buffer.compare(heard[0]!, body)).toBe(0);
    },
  );

  it('mixed UTF-8 and binary bodies completed in the same turn all come back exact', async () => {
    const items = bodies
      .slice(0, 13)
      .map(([name, body], i) => ({ key: k(`mixed-${i}`), body, name }));
    await Promise.all(
      items.map(({ key }) => store.claim(key, { token: 'o', fingerprint: '', leaseMs: LEASE })),
    );
    const done = items.map(({ key, body }) => store.complete(key, 'o', { meta: key, body }, TTL));
    const back = items.map(({ key }) =>
      store.claim(key, { token: 'q', fingerprint: '', leaseMs: LEASE }),
    );
    expect(await Promise.all(done)).toEqual(items.map(() => true));
    const results = await Promise.all(back);
    results.forEach((r, i) => {
      expect(r.status).toBe('completed');
      if (r.status === 'completed') {
        expect(r.response.meta).toBe(items[i].key);
        expect(Buffer.compare(r.response.body, items[i].body)).toBe(0);
      }
    });
  });
});

describe('user commands interleaved in the same turn on an auto-pipelining client', () => {
  const prefix = uniquePrefix('send-path-ap');
  let client: Redis;
  let store: RedisIdempotencyStore;

  beforeAll(async () => {
    client = track(makeClient(testRedisUrl(), { enableAutoPipelining: true }));
    await client.ping();
    store = new RedisIdempotencyStore(client);
    client.defineCommand('userEcho', { numberOfKeys: 1, lua: 'return {KEYS[1], ARGV[1]}' });
  });

  afterAll(async () => {
    await dropKeys(prefix);
  });

  it('never mismatches replies between the store and the user (GET/SET/INCR/user scripts)', async () => {
    for (let round = 0; round < 5; round++) {
      const ops: Promise<void>[] = [];
      for (let i = 0; i < 300; i++) {
        const key = `${prefix}{r${round}-${i}}`;
        const userKey = `${prefix}user-${round}-${i}`;
        ops.push(
          client.set(userKey, `v-${round}-${i}`).then((r) => expect(r).toBe('OK')),
          store
            .claim(key, { token: `t${i}`, fingerprint: `f${i}`, leaseMs: LEASE })
            .then((r) => expect(r).toEqual({ status: 'claimed' })),
          client.get(userKey).then((r) => expect(r).toBe(`v-${round}-${i}`)),
          store
            .complete(key, `t${i}`, { meta: `m${i}`, body: Buffer.from(`b${round}-${i}`) }, TTL)
            .then((r) => expect(r).toBe(true)),
          client
            .incrby(`${prefix}counter-${round}`, i)
            .then((r) => expect(r).toBe((i * (i + 1)) / 2)),
          (client as unknown as { userEcho(k: string, v: string): Promise<string[]> })
            .userEcho(userKey, `echo-${i}`)
            .then((r) => expect(r).toEqual([userKey, `echo-${i}`])),
          store.claim(key, { token: `z${i}`, fingerprint: `f${i}`, leaseMs: LEASE }).then((r) => {
            expect(r.status).toBe('completed');
            if (r.status === 'completed') {
              expect(r.response.meta).toBe(`m${i}`);
              expect(r.response.body.toString()).toBe(`b${round}-${i}`);
            }
          }),
          store
            .inspect(key)
            .then((r) => expect(r).toMatchObject({ state: 'completed', meta: `m${i}` })),
        );
      }
      await Promise.all(ops);
    }
  });

  it('keeps order with a user MULTI and a pipeline sent in the same turn', async () => {
    const key = `${prefix}{multi}`;
    const claim = store.claim(key, { token: 't', fingerprint: 'f', leaseMs: LEASE });
    const multi = client.multi().set(`${prefix}mx`, '1').get(`${prefix}mx`).exec();
    const pipe = client.pipeline().set(`${prefix}px`, '2').get(`${prefix}px`).exec();
    const inspect = store.inspect(key);
    expect(await claim).toEqual({ status: 'claimed' });
    expect(await multi).toEqual([
      [null, 'OK'],
      [null, '1'],
    ]);
    expect(await pipe).toEqual([
      [null, 'OK'],
      [null, '2'],
    ]);
    expect((await inspect).state).toBe('pending');
  });
});

describe('client options', () => {
  const prefix = uniquePrefix('send-path-opt');

  afterAll(async () => {
    await dropKeys(prefix);
  });

  it('enableOfflineQueue: false, ready: 200 claims in one turn all succeed', async () => {
    const client = track(makeClient(testRedisUrl(), { enableOfflineQueue: false }));
    await client.ping().catch(async () => {
      await new Promise((r) => client.once('ready', r));
    });
    if (client.status !== 'ready') await new Promise((r) => client.once('ready', r));
    const store = new RedisIdempotencyStore(client);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        store.claim(`${prefix}{offq-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
      ),
    );
    expect(results.every((r) => r.status === 'claimed')).toBe(true);
  });

  it('enableOfflineQueue: false with lazyConnect: rejects before connect, works after', async () => {
    const client = track(
      makeClient(testRedisUrl(), { enableOfflineQueue: false, lazyConnect: true }),
    );
    const store = new RedisIdempotencyStore(client);
    const early = await settleWithin(
      store.claim(`${prefix}{lazy-offq}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
      3000,
    );
    expect(early.state).toBe('rejected');
    if (client.status !== 'ready') await new Promise((r) => client.once('ready', r));
    expect(
      await store.claim(`${prefix}{lazy-offq}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
    ).toEqual({ status: 'claimed' });
  });

  it('lazyConnect: 500 claims and user commands before connect all resolve with their own values', async () => {
    const client = track(makeClient(testRedisUrl(), { lazyConnect: true }));
    const store = new RedisIdempotencyStore(client);
    const ops: Promise<unknown>[] = [];
    for (let i = 0; i < 500; i++) {
      ops.push(
        store
          .claim(`${prefix}{lazy-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE })
          .then((r) => expect(r).toEqual({ status: 'claimed' })),
        client.echo(`e${i}`).then((r) => expect(r).toBe(`e${i}`)),
        store
          .claim(`${prefix}{lazy-${i}}`, { token: 'u', fingerprint: '', leaseMs: LEASE })
          .then((r) => expect(r.status).toBe('in_progress')),
      );
    }
    await Promise.all(ops);
  });

  it('keyPrefix: keys land under the prefix once, also after SCRIPT FLUSH (private server)', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url, { keyPrefix: 'kp:' }));
    const raw = track(makeClient(server.url));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    expect(await store.claim('{a}', { token: 't', fingerprint: 'f', leaseMs: LEASE })).toEqual({
      status: 'claimed',
    });
    await raw.script('FLUSH');
    expect(await store.complete('{a}', 't', { meta: 'm', body: Buffer.from('€x') }, TTL)).toBe(
      true,
    );
    await raw.script('FLUSH');
    const again = await store.claim('{a}', { token: 'u', fingerprint: 'f', leaseMs: LEASE });
    expect(again.status).toBe('completed');
    // The record, and its listing (a completed record in its ttl's list).
    expect((await raw.keys('*')).sort()).toEqual([`kp:ix:done:${TTL}`, 'kp:ix:ttls', 'kp:{a}']);
  });

  // A claim is a native SET, which a SCRIPT FLUSH does not touch; a command sent after a script
  // that Redis has to load again (EVALSHA, NOSCRIPT, then EVAL) may run before it, so each kind of
  // call has its turn here.
  it('SCRIPT FLUSH between turns: 500 concurrent claims, completes and replays still answer correctly', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url));
    const raw = track(makeClient(server.url));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    for (let round = 0; round < 3; round++) {
      await raw.script('FLUSH');
      const claims = Array.from({ length: 500 }, (_, i) =>
        store.claim(`{sf-${round}-${i}}`, { token: 't', fingerprint: `${i}`, leaseMs: LEASE }),
      );
      expect((await Promise.all(claims)).every((r) => r.status === 'claimed')).toBe(true);
      await raw.script('FLUSH');
      const completes = Array.from({ length: 500 }, (_, i) =>
        store.complete(
          `{sf-${round}-${i}}`,
          't',
          { meta: `${i}`, body: Buffer.from([i & 0xff, 0xff]) },
          TTL,
        ),
      );
      expect((await Promise.all(completes)).every((r) => r)).toBe(true);
      const reclaims = Array.from({ length: 500 }, (_, i) =>
        store.claim(`{sf-${round}-${i}}`, { token: 'u', fingerprint: `${i}`, leaseMs: LEASE }),
      );
      (await Promise.all(reclaims)).forEach((r, i) => {
        expect(r.status).toBe('completed');
        if (r.status === 'completed') {
          expect(r.response.meta).toBe(`${i}`);
          expect(r.response.body.equals(Buffer.from([i & 0xff, 0xff]))).toBe(true);
        }
      });
    }
  });

  it('commandTimeout: a command timed out on a paused server does not shift later replies', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url, { commandTimeout: 150 }));
    const raw = track(makeClient(server.url));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    await raw.client('PAUSE', 600, 'ALL');
    const slow = await settleWithin(
      store.claim('{slow}', { token: 't', fingerprint: 'f', leaseMs: LEASE }),
      3000,
    );
    expect(slow.state).toBe('rejected');
    await raw.ping(); // answered once the pause is over
    // The late reply of the timed-out claim must not be handed to these.
    const [inspect, other] = await Promise.all([
      store.inspect('{slow}'),
      store.claim('{other}', { token: 't', fingerprint: 'f', leaseMs: LEASE }),
    ]);
    expect(inspect.state).toBe('pending');
    expect(other).toEqual({ status: 'claimed' });
    expect(await store.complete('{other}', 't', { meta: 'M', body: Buffer.from('B') }, TTL)).toBe(
      true,
    );
    const back = await store.claim('{other}', { token: 'x', fingerprint: 'f', leaseMs: LEASE });
    expect(back).toMatchObject({ status: 'completed', response: { meta: 'M' } });
  });

  it('commandTimeout: 2 000 claims in one turn on a healthy server do not time out', async () => {
    const client = track(makeClient(testRedisUrl(), { commandTimeout: 1000 }));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const results = await Promise.all(
      Array.from({ length: 2000 }, (_, i) =>
        store.claim(`${prefix}{ct-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
      ),
    );
    expect(results.every((r) => r.status === 'claimed')).toBe(true);
  });
});

describe('dropped connections and dead servers', () => {
  it('server SIGKILLed while a turn of claims is corked: all settle, and a later command works', async () => {
    const server = await privateServer();
    const client = track(
      makeClient(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 }),
    );
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const claims = Array.from({ length: 50 }, (_, i) =>
      store.claim(`{kill-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
    );
    expect(client.stream.writableCorked).toBe(1);
    process.kill(server.pid, 'SIGKILL');
    const outcomes = await Promise.all(claims.map((c) => settleWithin(c, 10_000)));
    expect(outcomes.filter((o) => o.state === 'hung')).toHaveLength(0);
    for (const o of outcomes)
      if (o.state === 'fulfilled') expect(o.value).toEqual({ status: 'claimed' });
    await server.stop();
    const again = await privateServer(server.port);
    expect(again.port).toBe(server.port);
    const later = await settleWithin(
      store.claim('{after-kill}', { token: 't', fingerprint: '', leaseMs: LEASE }),
      10_000,
    );
    expect(later).toEqual({ state: 'fulfilled', value: { status: 'claimed' } });
  });

  it('socket destroyed in the same turn as corked claims: none hang, results are consistent', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url, { maxRetriesPerRequest: 2 }));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const claims = Array.from({ length: 50 }, (_, i) =>
      store.claim(`{drop-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
    );
    client.stream.destroy();
    const outcomes = await Promise.all(claims.map((c) => settleWithin(c, 10_000)));
    expect(outcomes.filter((o) => o.state === 'hung')).toHaveLength(0);
    for (const o of outcomes)
      if (o.state === 'fulfilled') expect(o.value).toEqual({ status: 'claimed' });
    if (client.status !== 'ready') await new Promise((r) => client.once('ready', r));
    // Resent or not, each key is claimed at most once by 't'; a second owner sees in_progress or claims.
    const second = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        store.claim(`{drop-${i}}`, { token: 'u', fingerprint: '', leaseMs: LEASE }),
      ),
    );
    second.forEach((r, i) => {
      if (outcomes[i].state === 'fulfilled') expect(r.status).toBe('in_progress');
    });
    expect(
      await store.claim('{drop-later}', { token: 't', fingerprint: '', leaseMs: LEASE }),
    ).toEqual({ status: 'claimed' });
  });

  it('disconnect() in the same turn as corked claims: they reject, never hang', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const claims = Array.from({ length: 20 }, (_, i) =>
      store.claim(`{disc-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
    );
    client.disconnect();
    const outcomes = await Promise.all(claims.map((c) => settleWithin(c, 5000)));
    expect(outcomes.filter((o) => o.state === 'hung')).toHaveLength(0);
    for (const o of outcomes)
      if (o.state === 'fulfilled') expect(o.value).toEqual({ status: 'claimed' });
    const after = await settleWithin(
      store.claim('{disc-after}', { token: 't', fingerprint: '', leaseMs: LEASE }),
      5000,
    );
    // A disconnected client is 'end' or reconnects lazily on the next command: either way it settles.
    expect(after.state).not.toBe('hung');
  });

  it('quit() then claim in the same turn: the claim settles (rejects), never hangs', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const quit = client.quit();
    const claim = settleWithin(
      store.claim('{after-quit-same-turn}', { token: 't', fingerprint: '', leaseMs: LEASE }),
      5000,
    );
    await quit;
    const outcome = await claim;
    expect(outcome.state).toBe('rejected');
  });

  it('a claim on a client that was quit() rejects, never hangs', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    await client.quit();
    const outcome = await settleWithin(
      store.claim('{after-quit}', { token: 't', fingerprint: '', leaseMs: LEASE }),
      5000,
    );
    expect(outcome.state).toBe('rejected');
  });

  it('server restarted on the same port (failover-like): script cache empty, claims work again', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url, { retryStrategy: () => 50 }));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    expect(await store.claim('{r1}', { token: 't', fingerprint: '', leaseMs: LEASE })).toEqual({
      status: 'claimed',
    });
    const closed = new Promise((resolve) => client.once('close', resolve));
    await server.stop();
    await closed;
    // Commands issued while the server is down are queued and sent after the restart.
    const whileDown = Array.from({ length: 30 }, (_, i) =>
      store.claim(`{down-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
    );
    await privateServer(server.port);
    const results = await Promise.all(whileDown.map((c) => settleWithin(c, 10_000)));
    expect(results.every((r) => r.state === 'fulfilled')).toBe(true);
    for (const r of results)
      if (r.state === 'fulfilled') expect(r.value).toEqual({ status: 'claimed' });
    if (client.status !== 'ready') await new Promise((r) => client.once('ready', r));
    // The new server has no record of {r1}; many claims in one corked turn after the restart.
    const after = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        store.claim(`{r-after-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
      ),
    );
    expect(after.every((r) => r.status === 'claimed')).toBe(true);
    expect(await store.claim('{r1}', { token: 'u', fingerprint: '', leaseMs: LEASE })).toEqual({
      status: 'claimed',
    });
  });

  it('claims made inside the client’s own ready event after a reconnect are answered correctly', async () => {
    const server = await privateServer();
    const client = track(makeClient(server.url, { retryStrategy: () => 50 }));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const queued = store.claim('{pre}', { token: 't', fingerprint: '', leaseMs: LEASE });
    await queued;
    client.stream.destroy();
    const inReady = new Promise<unknown[]>((resolve, reject) =>
      client.once('ready', () => {
        Promise.all([
          store.claim('{in-ready}', { token: 't', fingerprint: '', leaseMs: LEASE }),
          client.echo('hello'),
          store.inspect('{pre}'),
        ]).then(resolve, reject);
      }),
    );
    const offline = store.claim('{offline}', { token: 't', fingerprint: '', leaseMs: LEASE });
    const echo = client.echo('queued-echo');
    const [claim, hello, inspect] = await inReady;
    expect(claim).toEqual({ status: 'claimed' });
    expect(hello).toBe('hello');
    expect(inspect).toMatchObject({ state: 'pending' });
    expect(await offline).toEqual({ status: 'claimed' });
    expect(await echo).toBe('queued-echo');
  });
});

describe('more turns', () => {
  const prefix = uniquePrefix('send-path-more');
  afterAll(async () => {
    await dropKeys(prefix);
  });

  it('under jest modern fake timers (all faked) a claim still leaves and resolves', async () => {
    const client = track(makeClient(testRedisUrl()));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    jest.useFakeTimers();
    try {
      const claim = store.claim(`${prefix}{fake}`, { token: 't', fingerprint: '', leaseMs: LEASE });
      const outcome = await Promise.race([
        claim.then((v) => ({ v })),
        new Promise((resolve) => realSetTimeout(() => resolve('hung'), 3000)),
      ]);
      expect(outcome).toEqual({ v: { status: 'claimed' } });
    } finally {
      jest.useRealTimers();
    }
  });

  it('30 x 1 MB completes corked in one turn, then re-claimed byte-exact', async () => {
    const client = track(makeClient(testRedisUrl()));
    await client.ping();
    const store = new RedisIdempotencyStore(client);
    const bodies = Array.from({ length: 30 }, (_, i) =>
      i % 2 === 0
        ? Buffer.from(`${i}€`.repeat(1 << 18))
        : Buffer.concat([Buffer.alloc(1 << 20, i), Buffer.from([0xff])]),
    );
    const keys = bodies.map((_, i) => `${prefix}{big-${i}}`);
    await Promise.all(
      keys.map((k) => store.claim(k, { token: 't', fingerprint: '', leaseMs: LEASE })),
    );
    const done = keys.map((k, i) =>
      store.complete(k, 't', { meta: `m${i}`, body: bodies[i] }, TTL),
    );
    const back = keys.map((k) => store.claim(k, { token: 'u', fingerprint: '', leaseMs: LEASE }));
    expect(await Promise.all(done)).toEqual(keys.map(() => true));
    (await Promise.all(back)).forEach((r, i) => {
      expect(r.status).toBe('completed');
      if (r.status === 'completed') {
        expect(r.response.meta).toBe(`m${i}`);
        expect(Buffer.compare(r.response.body, bodies[i])).toBe(0);
      }
    });
  });

  it('store.close() (ownsClient) in the same turn as claims: the claims sent before QUIT succeed', async () => {
    const client = track(makeClient(testRedisUrl()));
    await client.ping();
    const store = new RedisIdempotencyStore(client, { ownsClient: true });
    const claims = Array.from({ length: 20 }, (_, i) =>
      store.claim(`${prefix}{close-${i}}`, { token: 't', fingerprint: '', leaseMs: LEASE }),
    );
    const closed = store.close();
    const outcomes = await Promise.all(claims.map((c) => settleWithin(c, 5000)));
    await closed;
    expect(outcomes).toEqual(
      claims.map(() => ({ state: 'fulfilled', value: { status: 'claimed' } })),
    );
  });

  it('two stores on one client, claims interleaved in one turn, each reply its own', async () => {
    const client = track(makeClient(testRedisUrl(), { keyPrefix: `${prefix}two:` }));
    await client.ping();
    const a = new RedisIdempotencyStore(client);
    const b = new RedisIdempotencyStore(client);
    const ops: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) {
      ops.push(
        a
          .claim(`{k${i}}`, { token: 'a', fingerprint: 'x', leaseMs: LEASE })
          .then((r) => expect(r).toEqual({ status: 'claimed' })),
        b
          .claim(`{k${i}}`, { token: 'b', fingerprint: 'y', leaseMs: LEASE })
          .then((r) => expect(r).toEqual({ status: 'key_reused' })),
        b.extend(`{k${i}}`, 'b', LEASE).then((r) => expect(r).toBe(false)),
        a.extend(`{k${i}}`, 'a', LEASE).then((r) => expect(r).toBe(true)),
        a.release(`{k${i}}`, 'a').then((r) => expect(r).toBe(true)),
        b.inspect(`{k${i}}`).then((r) => expect(r).toEqual({ state: 'absent' })),
      );
    }
    await Promise.all(ops);
  });
});
