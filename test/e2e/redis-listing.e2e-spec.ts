import Redis, { Cluster } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import {
  RedisClusterProcesses,
  RedisProcess,
  startRedisCluster,
  startRedisServer,
} from '../support/redis-server';

/**
 * The Redis store's listing index, beyond the contract suite (which every store passes): what a
 * listing reads, records written before the index existed, what keeps the index from growing,
 * and keys it cannot hold.
 */

const about = { route: 'POST /orders', label: 'sealed key and owner' };
const response = { meta: '{"s":201}', body: Buffer.from('{"id":1}') };
const step = (index: number, name: string) => ({ index, name, result: response });

/** Keys Redis looked up (hits and misses, scripts' commands included) while `fn` ran. */
async function keysRead(admin: Redis, fn: () => Promise<unknown>): Promise<number> {
  const lookups = async () => {
    const stats = await admin.info('stats');
    const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(stats)![1]);
    return field('keyspace_hits') + field('keyspace_misses');
  };
  const before = await lookups();
  await fn();
  return (await lookups()) - before;
}

describe('Redis listing index on a private redis-server', () => {
  let server: RedisProcess;
  let admin: Redis;
  let store: RedisIdempotencyStore;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    store = new RedisIdempotencyStore(new Redis(server.url), { ownsClient: true });
  });
  afterAll(async () => {
    await store.close();
    admin.disconnect();
    await server.stop();
  });

  it('reads about as many keys as it lists: 10 half-done runs among 2 000 completed records', async () => {
    const prefix = 'many:';
    for (let from = 0; from < 2_000; from += 500) {
      await Promise.all(
        Array.from({ length: 500 }, async (_, i) => {
          const key = `${prefix}{c${from + i}}`;
          await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000, about });
          await store.complete(key, 't', response, 600_000);
        }),
      );
    }
    for (let i = 0; i < 10; i++) {
      const key = `${prefix}{h${i}}`;
      await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000, resumable: true });
      await store.recordStep(key, 't', step(0, 'order'), 600_000);
      await store.release(key, 't');
    }
    let page = { items: [] as unknown[] };
    const halfDone = await keysRead(admin, async () => {
      page = await store.list({ prefix, state: 'half_done', limit: 50 });
    });
    expect(page.items).toHaveLength(10);
    // Per run: its record, its steps (twice) and their names; and the space's index.
    expect(halfDone).toBeLessThanOrEqual(10 * 5 + 5);
    const completed = await keysRead(admin, async () => {
      page = await store.list({ prefix, state: 'completed', limit: 20 });
    });
    expect(page.items).toHaveLength(20);
    // The records listed, the one that tells there are more, and those completed in the same
    // millisecond as the last (ties are ordered by id, so they are all read: here, completions
    // came 500 at a time); never all 2 000.
    expect(completed).toBeLessThan(21 + 500);
    expect(await store.countRecords(prefix)).toEqual({
      running: 0,
      stuck: 0,
      half_done: 10,
      completed: 2_000,
    });
  });

  it("reads the steps of a page's runs only: a page of 10 among 500 half-done runs", async () => {
    const prefix = 'outage:';
    await Promise.all(
      Array.from({ length: 500 }, async (_, i) => {
        const key = `${prefix}{h${i}}`;
        await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000, resumable: true });
        await store.recordStep(key, 't', step(0, 'order'), 600_000);
        await store.recordStep(key, 't', step(1, 'charge'), 600_000);
        await store.release(key, 't');
      }),
    );
    let items: { steps?: unknown }[] = [];
    const read = await keysRead(admin, async () => {
      ({ items } = await store.list({ prefix, state: 'half_done', limit: 10 }));
    });
    expect(items).toHaveLength(10);
    for (const item of items) {
      expect(item.steps).toEqual([
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ]);
    }
    // Each run's entry tells its state (its record, whether it has steps); the steps' names are
    // read for the page (and the one that tells more follow) alone, not for all 500.
    expect(read).toBeLessThanOrEqual(500 * 2 + 11 * 2 + 5);
  });

  it('keeps records written before the index: completes and replays them, lists what it can', async () => {
    const prefix = 'old:';
    // A claim of script version 5: four values, nothing listed.
    const pending = `${prefix}{pending}`;
    await admin.eval(
      "return redis.call('SET', KEYS[1], cmsgpack.pack('p', 'fp', 'old-token', 0), 'PX', 60000)",
      1,
      pending,
    );
    expect(await store.complete(pending, 'old-token', response, 60_000)).toBe(true);
    const replay = await store.claim(pending, { token: 'b', fingerprint: 'fp', leaseMs: 1_000 });
    expect(replay.status === 'completed' && replay.response.body).toEqual(response.body);
    const { items } = await store.list({ prefix, state: 'completed', limit: 10 });
    expect(items.map((item) => [item.key, item.about, item.meta])).toEqual([
      [pending, undefined, response.meta],
    ]);
    // A record of this version completed by an older one (which keeps no index): its claim is
    // not listed as running or stuck.
    const overwritten = `${prefix}{overwritten}`;
    await store.claim(overwritten, { token: 't', fingerprint: 'fp', leaseMs: 60_000, about });
    await admin.eval(
      "return redis.call('SET', KEYS[1], cmsgpack.pack('c', 'fp', 'm', 'b'), 'PX', 60000)",
      1,
      overwritten,
    );
    for (const state of ['running', 'stuck', 'half_done'] as const) {
      expect((await store.list({ prefix, state, limit: 10 })).items).toEqual([]);
    }
  });

  it('forgets a claim whose process died without steps a day after its claim, as claims go by', async () => {
    const prefix = 'dead:';
    const dead = `${prefix}{dead}`;
    await store.claim(dead, { token: 't', fingerprint: '', leaseMs: 50, about });
    // Claimed a day and a minute ago: rewrite its entry's claim time. Through the store's client:
    // the claim's listing entry follows its SET on that connection, and so comes before this.
    await (store.client as Redis).eval(
      `local v = {cmsgpack.unpack(redis.call('HGET', KEYS[1], ARGV[1]))}
       v[1] = v[1] - 86460000
       return redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(unpack(v)))`,
      1,
      `${prefix}ix:runs`,
      '{dead}',
    );
    const listed = async () => (await store.list({ prefix, state: 'stuck', limit: 10 })).items;
    while ((await admin.exists(dead)) === 1) await admin.ping(); // its lease runs out
    expect((await listed()).map((item) => item.key)).toEqual([dead]);
    // One claim in 128 looks at a few entries (here, all: the hash is small).
    let claims = 0;
    while ((await admin.hexists(`${prefix}ix:runs`, '{dead}')) && claims < 5_000) {
      const key = `${prefix}{c${claims++}}`;
      await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000 });
      await store.complete(key, 't', response, 60_000);
    }
    expect(claims).toBeLessThan(5_000);
    expect(await listed()).toEqual([]);
  });

  it('drops the expired head of a done list as completions go by', async () => {
    const prefix = 'trim:';
    const complete = async (count: number, tag: string) => {
      for (let i = 0; i < count; i++) {
        const key = `${prefix}{${tag}${i}}`;
        await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000 });
        await store.complete(key, 't', response, 100);
      }
    };
    await complete(200, 'a');
    const list = `${prefix}ix:done:100`;
    expect(await admin.llen(list)).toBeGreaterThan(100);
    // Wait until Redis has forgotten them: then every one is expired in the list too.
    while ((await admin.exists(`${prefix}{a199}`)) === 1) await admin.ping();
    await complete(200, 'b');
    // One completion in 8 drops up to 16 expired: the first 200 are gone by now, mostly.
    expect(await admin.llen(list)).toBeLessThan(300);
    const count = await store.countRecords(prefix);
    expect(count.completed).toBeLessThanOrEqual(200);
  });

  it('claims as before, and lists nothing, for a key without a trailing hash tag', async () => {
    const key = 'no-tag:plain';
    expect(await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000 })).toEqual({
      status: 'claimed',
    });
    expect(await store.complete(key, 't', response, 60_000)).toBe(true);
    expect(await admin.keys('no-tag:*')).toEqual([key]);
    expect(await store.markAbandoned(key, Date.now())).toBe(false);
  });
});

describe('Redis listing index on a 3-master Cluster', () => {
  let cluster: RedisClusterProcesses;
  let store: RedisIdempotencyStore;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    store = new RedisIdempotencyStore(new Cluster(cluster.nodes), { ownsClient: true });
  });
  afterAll(async () => {
    await store.close();
    await cluster.stop();
  });

  it('lists records under a prefix with a hash tag, all on its slot', async () => {
    const prefix = '{app}:';
    const keys = Array.from({ length: 5 }, (_, i) => `${prefix}{k${i}}`);
    for (const key of keys) {
      await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000, about });
    }
    await store.complete(keys[0], 't', response, 60_000);
    const running = await store.list({ prefix, state: 'running', limit: 10, order: 'oldest' });
    expect(running.items.map((item) => item.key)).toEqual(keys.slice(1));
    const completed = await store.list({ prefix, state: 'completed', limit: 10 });
    expect(completed.items.map((item) => [item.key, item.about])).toEqual([[keys[0], about]]);
  });

  it('claims as before, and lists nothing, where the index cannot share the record’s slot', async () => {
    // A prefix whose brace opens a tag that the record's own closes: the index would land on
    // another slot, so it keeps none (and no script fails for a cross-slot key).
    for (const key of ['odd{:{k}', 'plain-key']) {
      expect(await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000 })).toEqual({
        status: 'claimed',
      });
      expect(await store.complete(key, 't', response, 60_000)).toBe(true);
      expect(await store.delete(key)).toBe(true);
    }
    expect((await store.list({ prefix: 'odd{:', state: 'completed', limit: 10 })).items).toEqual(
      [],
    );
  });
});
