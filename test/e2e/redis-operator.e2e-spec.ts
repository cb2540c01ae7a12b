import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { packageFolder } from '../../lib/utils/load-optional';

/** Redis's clock in ms, as the scripts read it. */
async function redisTime(client: Redis): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe('Redis operator calls (inspect, delete) and the completed record’s time', () => {
  const prefix = uniquePrefix('operator');
  let client: Redis;
  let store: RedisIdempotencyStore;
  let seq = 0;
  const newKey = () => `${prefix}{${++seq}}`;

  beforeAll(() => {
    client = inspectionClient();
    store = new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true });
  });
  afterAll(async () => {
    await store.close();
    await deleteKeysUnder(client, prefix);
    await client.quit();
  });

  it('stores the completion time from Redis’s clock after the four values claim reads', async () => {
    const key = newKey();
    await store.claim(key, { token: 'a', fingerprint: 'fp', leaseMs: 30_000 });
    const before = await redisTime(client);
    await store.complete(key, 'a', { meta: 'm', body: Buffer.from('body') }, 60_000);
    const after = await redisTime(client);
    const values = (await client.eval(
      "return {cmsgpack.unpack(redis.call('GET', KEYS[1]))}",
      1,
      key,
    )) as (string | number)[];
    expect(values.slice(0, 4)).toEqual(['c', 'fp', 'm', 'body']);
    expect(values[4]).toBeGreaterThanOrEqual(before);
    expect(values[4]).toBeLessThanOrEqual(after);
  });

  it('reads a record written before completion times: replays it, inspects its age as -1, deletes it', async () => {
    const key = newKey();
    // What the completion script wrote up to script version 4: four values, no completion time.
    await client.eval(
      "return redis.call('SET', KEYS[1], cmsgpack.pack('c', 'fp', 'meta', ARGV[1]), 'PX', 60000)",
      1,
      key,
      Buffer.from([0, 255, 10]),
    );
    const replay = await store.claim(key, { token: 'b', fingerprint: 'fp', leaseMs: 30_000 });
    expect(replay.status === 'completed' && replay.response.body).toEqual(
      Buffer.from([0, 255, 10]),
    );
    const seen = await store.inspect(key);
    expect(seen).toEqual({
      state: 'completed',
      meta: 'meta',
      bytes: 3,
      ageMs: -1,
      ttlMsLeft: expect.any(Number),
    });
    expect(seen.state === 'completed' && seen.ttlMsLeft).toBeGreaterThan(50_000);
    expect(await store.delete(key)).toBe(true);
    expect(await client.exists(key)).toBe(0);
  });

  it('answers inspect of a 1 MiB record with its size, never its body', async () => {
    const key = newKey();
    await store.claim(key, { token: 'a', fingerprint: 'fp', leaseMs: 30_000 });
    const body = Buffer.alloc(1024 * 1024, 'x');
    await store.complete(key, 'a', { meta: '{"s":200}', body }, 60_000);
    const lua = readFileSync(join(packageFolder('lua'), 'inspect-1.lua'), 'utf8');
    const reply = (await client.callBuffer('EVAL', lua, 1, key)) as (number | Buffer)[];
    expect(reply).toHaveLength(5);
    expect(reply.slice(0, 3)).toEqual([2, Buffer.from('{"s":200}'), body.length]);
    expect(await store.inspect(key)).toMatchObject({ state: 'completed', bytes: body.length });
  });

  it('notifies a watcher of a delete even when no waiting claim marked the record', async () => {
    const key = newKey();
    await store.claim(key, { token: 'a', fingerprint: 'fp', leaseMs: 30_000 });
    let notified!: (completed: unknown) => void;
    const message = new Promise((resolve) => (notified = resolve));
    const unwatch = await store.watch(key, notified);
    try {
      expect(await store.delete(key)).toBe(true);
      await expect(message).resolves.toBeUndefined();
    } finally {
      unwatch();
    }
  });
});
