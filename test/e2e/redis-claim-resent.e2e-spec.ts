import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { listingEntry, pendingRecord } from '../../lib/stores/redis/redis-records';
import { testRedisUrl, uniquePrefix } from '../support/redis';

/**
 * ioredis sends a command again when its reply was lost with the connection: a claim's SET NX GET
 * that took the key then replies the caller's own record, which is claimed, as the first send
 * answered. It is listed as the first send would have been listed (its listing entry follows the
 * reply, so the first send wrote none), and its token and fingerprint are compared as bytes, as
 * the scripts compare them.
 */
describe('a claim sent again after its reply was lost', () => {
  let client: Redis;
  let store: RedisIdempotencyStore;
  const prefix = uniquePrefix('claim-resent');

  beforeAll(() => {
    client = new Redis(testRedisUrl());
    store = new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true });
  });
  afterAll(async () => {
    const keys = await client.keys(`${prefix}*`);
    if (keys.length) await client.del(...keys);
    await store.close();
    client.disconnect();
  });

  it('is listed as running, with its own route, not as the dead claim of the key before it', async () => {
    const key = `${prefix}{k}`;
    const now = Date.now();
    // A claim of the key whose process died 20 hours ago: listed as stuck.
    const dead = now - 20 * 3_600_000;
    await client.hset(`${prefix}ix:runs`, '{k}', listingEntry(dead, dead + 30_000, 'POST /old'));
    // The first send took the key; its reply was lost.
    const entry = listingEntry(now, now + 30_000, 'POST /new');
    await client.set(key, pendingRecord('f', 'tok', entry), 'PX', 30_000, 'NX');
    const about = { route: 'POST /new', label: '' };
    const request = { token: 'tok', fingerprint: 'f', leaseMs: 30_000, about };
    expect(await store.claim(key, request)).toEqual({ status: 'claimed' });
    const list = (state: 'stuck' | 'running') =>
      store.list({ prefix, state, stuckAfterMs: 3_600_000, limit: 10 });
    expect((await list('stuck')).items).toEqual([]);
    const running = (await list('running')).items;
    expect(running.map((item) => [item.about?.route, item.since])).toEqual([['POST /new', now]]);
  });

  // A lone surrogate does not survive a UTF-8 round trip as a string, but its bytes do.
  const fingerprint = 'caf\uD83D';

  it('replays the same fingerprint, compared as bytes', async () => {
    const key = `${prefix}{replay}`;
    await store.claim(key, { token: 'a', fingerprint, leaseMs: 30_000 });
    await store.complete(key, 'a', { meta: '{}', body: Buffer.from('ok') }, 60_000);
    const replay = await store.claim(key, { token: 'c', fingerprint, leaseMs: 30_000 });
    expect(replay.status).toBe('completed');
  });

  it("knows the caller's own token, compared as bytes", async () => {
    const key = `${prefix}{token}`;
    const token = 'tok\uDC00';
    await store.claim(key, { token, fingerprint: 'f', leaseMs: 30_000 });
    expect(await store.claim(key, { token, fingerprint: 'f', leaseMs: 30_000 })).toEqual({
      status: 'claimed',
    });
  });
});
