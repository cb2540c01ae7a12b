import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/redis';

/**
 * `new RedisIdempotencyStore(client, { listing: false })`: the store keeps no listing index, so a
 * first execution leaves out the index's work, and it is a store that cannot list (no list(),
 * countRecords() nor markAbandoned()), as the module tells one.
 */
describe('a Redis store with listing: false', () => {
  let client: Redis;
  let store: RedisIdempotencyStore;
  const prefix = uniquePrefix('listing-off');
  const about = { route: 'POST /orders', label: 'key and owner' };

  beforeAll(() => {
    client = new Redis(testRedisUrl());
    store = new RedisIdempotencyStore(new Redis(testRedisUrl()), {
      ownsClient: true,
      listing: false,
    });
  });
  afterAll(async () => {
    const keys = await client.keys(`${prefix}*`);
    if (keys.length) await client.del(...keys);
    await store.close();
    client.disconnect();
  });

  it('keeps no index, and claims, completes, replays and releases as ever', async () => {
    const claim = { token: 'a', fingerprint: 'f', leaseMs: 30_000, about };
    expect(await store.claim(`${prefix}{a}`, claim)).toEqual({ status: 'claimed' });
    const response = { meta: 'm', body: Buffer.from('ok') };
    expect(await store.complete(`${prefix}{a}`, 'a', response, 60_000)).toBe(true);
    expect(await store.claim(`${prefix}{a}`, { ...claim, token: 'b' })).toEqual({
      status: 'completed',
      response,
    });
    expect(await store.claim(`${prefix}{b}`, claim)).toEqual({ status: 'claimed' });
    expect(await store.release(`${prefix}{b}`, 'a')).toBe(true);
    expect((await client.keys(`${prefix}*`)).sort()).toEqual([`${prefix}{a}`]);
  });

  it('cannot list, as a store without the optional listing methods', () => {
    expect(store.list).toBeUndefined();
    expect(store.countRecords).toBeUndefined();
    expect(store.markAbandoned).toBeUndefined();
    const listing = new RedisIdempotencyStore(client);
    expect(typeof listing.list).toBe('function');
  });

  it('refuses a misspelt name and a value that is not a boolean', () => {
    expect(() => new RedisIdempotencyStore(client, { listng: false } as object)).toThrow(
      /unknown option `listng` \(did you mean `listing`\?\)/,
    );
    expect(
      () => new RedisIdempotencyStore(client, { listing: 'no' } as unknown as { listing: boolean }),
    ).toThrow('RedisIdempotencyStore: listing must be a boolean, got string');
  });
});
