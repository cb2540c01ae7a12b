import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { RedisProcess, startRedisServer } from '../support/redis-server';

/**
 * At `maxmemory` under `noeviction` (the policy the store's eviction warning asks for), Redis
 * refuses every SET, even an NX that would write nothing: a claim sent as SET NX GET is then
 * answered by lua/claim-2.lua, which writes only when it takes the key. What is stored still
 * replays, a 409 and a 422 are still answered; only a claim that would write fails.
 */
describe('a Redis at maxmemory (noeviction)', () => {
  let server: RedisProcess;
  let admin: Redis;
  let store: RedisIdempotencyStore;
  const claim = { token: 't1', fingerprint: 'f', leaseMs: 30_000 };

  beforeAll(async () => {
    server = await startRedisServer({ args: ['--maxmemory-policy', 'noeviction'] });
    admin = new Redis(server.url);
    store = new RedisIdempotencyStore(new Redis(server.url, { maxRetriesPerRequest: 1 }), {
      ownsClient: true,
    });
    expect(await store.claim('done{a}', claim)).toEqual({ status: 'claimed' });
    const body = Buffer.from('{"ok":true}');
    expect(await store.complete('done{a}', 't1', { meta: '{}', body }, 60_000)).toBe(true);
    expect(await store.claim('held{a}', { ...claim, token: 'h1' })).toEqual({ status: 'claimed' });
    await admin.config('SET', 'maxmemory', '1');
  });
  afterAll(async () => {
    await admin.config('SET', 'maxmemory', '0');
    await store.close();
    admin.disconnect();
    await server.stop();
  });

  it('replays, and answers 422 and 409', async () => {
    expect(await store.claim('done{a}', { ...claim, token: 't2' })).toMatchObject({
      status: 'completed',
    });
    expect(await store.claim('done{a}', { ...claim, token: 't3', fingerprint: 'g' })).toEqual({
      status: 'key_reused',
    });
    expect(await store.claim('held{a}', { ...claim, token: 't4' })).toMatchObject({
      status: 'in_progress',
    });
  });

  it('fails a claim that would write, with the error Redis gave', async () => {
    await expect(store.claim('new{a}', claim)).rejects.toThrow(/OOM/);
  });
});
