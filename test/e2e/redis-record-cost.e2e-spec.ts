import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { RedisProcess, startRedisServer } from '../support/redis-server';

/** Calls of one command since the last RESETSTAT, scripts' own calls included. */
async function calls(client: Redis, command: string): Promise<number> {
  const stats = await client.info('commandstats');
  const line = stats.split('\n').find((entry) => entry.startsWith(`cmdstat_${command}:`));
  return Number(line?.match(/calls=(\d+)/)?.[1] ?? 0);
}

describe('what a cheap request costs Redis, whatever the stored body size', () => {
  let server: RedisProcess;
  let client: Redis;
  let store: RedisIdempotencyStore;

  beforeAll(async () => {
    // A private server: RESETSTAT must never touch a shared one.
    server = await startRedisServer();
    client = new Redis(server.url);
    store = new RedisIdempotencyStore(new Redis(server.url), { ownsClient: true });
  });
  afterAll(async () => {
    await store.close();
    client.disconnect();
    await server.stop();
  });

  it('answers 422 on a record with a 1 MiB body without reading the body', async () => {
    const claim = { token: 'first', fingerprint: 'fingerprint-a', leaseMs: 30_000 };
    expect(await store.claim('big', claim)).toEqual({ status: 'claimed' });
    const body = Buffer.alloc(1024 * 1024, 'x');
    expect(await store.complete('big', 'first', { meta: '{}', body }, 60_000)).toBe(true);
    // The body lives apart: the record, which the claim's SET ... GET replies, stays small.
    expect(await client.strlen('big')).toBeLessThan(256);
    expect(await client.strlen('big:b')).toBe(body.length);
    await client.config('RESETSTAT');
    const other = { token: 'second', fingerprint: 'fingerprint-b', leaseMs: 30_000 };
    expect(await store.claim('big', other)).toEqual({ status: 'key_reused' });
    expect(await calls(client, 'set')).toBe(1);
    expect(await calls(client, 'get')).toBe(0);
    // A replay reads the body with its record, in a second round trip: the claim script.
    await client.config('RESETSTAT');
    const replay = await store.claim('big', { ...claim, token: 'third' });
    expect(replay.status).toBe('completed');
    expect(replay.status === 'completed' && replay.response.body.equals(body)).toBe(true);
    expect(await calls(client, 'set')).toBe(1);
    // EVAL when the script is new to this server (EVALSHA refused, then EVAL).
    expect((await calls(client, 'evalsha')) + (await calls(client, 'eval'))).toBe(1);
  });

  it('keeps a body of up to 4 KiB in its record: a replay is one round trip', async () => {
    const claim = { token: 'first', fingerprint: 'f', leaseMs: 30_000 };
    await store.claim('small', claim);
    const body = Buffer.alloc(4096, 'y');
    expect(await store.complete('small', 'first', { meta: '{}', body }, 60_000)).toBe(true);
    expect(await client.exists('small:b')).toBe(0);
    await client.config('RESETSTAT');
    const replay = await store.claim('small', { ...claim, token: 'second' });
    expect(replay.status === 'completed' && replay.response.body.equals(body)).toBe(true);
    expect(await calls(client, 'set')).toBe(1);
    expect(await calls(client, 'get')).toBe(0);
    expect(await calls(client, 'evalsha')).toBe(0);
  });

  it('answers 409 without reading the record twice', async () => {
    await store.claim('held', { token: 'first', fingerprint: 'f', leaseMs: 30_000 });
    await client.config('RESETSTAT');
    const duplicate = await store.claim('held', {
      token: 'second',
      fingerprint: 'f',
      leaseMs: 30_000,
    });
    expect(duplicate.status).toBe('in_progress');
    expect(await calls(client, 'get')).toBe(0);
  });
});
