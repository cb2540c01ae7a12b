import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/redis';

/**
 * A completed body over 4 KiB lives apart from its record, at `<key>:b` (a 'C' record): a replay
 * reads both of one moment, and a record whose body Redis evicted (the larger key, so the likelier
 * one to go under any `maxmemory-policy` but noeviction) frees its key as an evicted record would.
 */
describe('a completed body over 4 KiB, stored apart from its record', () => {
  let client: Redis;
  let store: RedisIdempotencyStore;
  let other: RedisIdempotencyStore;
  const prefix = uniquePrefix('body-apart');
  const claim = { token: 'a', fingerprint: 'f', leaseMs: 30_000 };

  beforeAll(() => {
    client = new Redis(testRedisUrl());
    store = new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true });
    other = new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true });
  });
  afterAll(async () => {
    const keys = await client.keys(`${prefix}*`);
    if (keys.length) await client.del(...keys);
    await Promise.all([store.close(), other.close()]);
    client.disconnect();
  });

  /** A key completed by `a` with an 8 KiB body, whose body then goes as eviction would take it. */
  async function bodyEvicted(key: string): Promise<void> {
    expect(await store.claim(key, claim)).toEqual({ status: 'claimed' });
    const body = Buffer.alloc(8192, 'x');
    expect(await store.complete(key, 'a', { meta: '{}', body }, 3_600_000)).toBe(true);
    expect(await client.exists(`${key}:b`)).toBe(1);
    await client.del(`${key}:b`);
  }

  it('frees the key of a record whose body was evicted, for the next claim to run', async () => {
    const key = `${prefix}{evicted}`;
    await bodyEvicted(key);
    expect(await store.claim(key, { ...claim, token: 'b' })).toEqual({ status: 'claimed' });
  });

  it('answers another fingerprint 422 all the same: the record is there', async () => {
    const key = `${prefix}{evicted-other}`;
    await bodyEvicted(key);
    const other = { ...claim, token: 'b', fingerprint: 'g' };
    expect(await store.claim(key, other)).toEqual({ status: 'key_reused' });
    expect(await store.claim(key, { ...other, waiting: true })).toEqual({ status: 'key_reused' });
  });

  it('frees it for a waiting duplicate too (lua/claim-2.lua)', async () => {
    const key = `${prefix}{evicted-wait}`;
    await bodyEvicted(key);
    const again = await store.claim(key, { ...claim, token: 'b', waiting: true });
    expect(again).toEqual({ status: 'claimed' });
  });

  it("never replays another completion's body under this record's meta", async () => {
    const key = `${prefix}{race}`;
    const mine = Buffer.alloc(8192, 'm');
    const theirs = Buffer.alloc(8192, 'T');
    await store.claim(key, { ...claim, fingerprint: 'mine' });
    await store.complete(key, 'a', { meta: 'mine', body: mine }, 60_000);
    // Between the claim's reply and anything read after it, the record goes (its retention
    // ends, an operator deletes it) and another request completes the key.
    const internals = (
      store as unknown as {
        natives: { native: (name: string, ...args: unknown[]) => Promise<unknown> };
      }
    ).natives;
    const native = internals.native;
    internals.native = async (name, ...args) => {
      const reply = await native(name, ...args);
      if (name === 'set') {
        await other.delete(key);
        await other.claim(key, { token: 'x', fingerprint: 'theirs', leaseMs: 30_000 });
        await other.complete(key, 'x', { meta: 'theirs', body: theirs }, 60_000);
      }
      return reply;
    };
    let replay;
    try {
      replay = await store.claim(key, { ...claim, token: 'b', fingerprint: 'mine' });
    } finally {
      internals.native = native;
    }
    // Read with its record, of one moment: the other request's record, another fingerprint.
    expect(replay).toEqual({ status: 'key_reused' });
  });

  it('is deleted with its record, and so is one its record left behind', async () => {
    const key = `${prefix}{delete}`;
    await store.claim(key, claim);
    await store.complete(key, 'a', { meta: '{}', body: Buffer.alloc(8192, 'd') }, 60_000);
    expect(await store.inspect(key)).toMatchObject({ state: 'completed', bytes: 8192 });
    expect(await store.delete(key)).toBe(true);
    expect(await client.exists(key, `${key}:b`)).toBe(0);
    await client.set(`${key}:b`, 'left behind', 'PX', 60_000);
    await store.delete(key);
    expect(await client.exists(`${key}:b`)).toBe(0);
  });
});
