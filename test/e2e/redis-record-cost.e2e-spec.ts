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
    await client.config('RESETSTAT');
    const other = { token: 'second', fingerprint: 'fingerprint-b', leaseMs: 30_000 };
    expect(await store.claim('big', other)).toEqual({ status: 'key_reused' });
    // The state and fingerprint come from the record's first bytes; GET would copy all of it.
    expect(await calls(client, 'get')).toBe(0);
    expect(await calls(client, 'getrange')).toBe(1);
    // A replay still reads it whole.
    const replay = await store.claim('big', { ...claim, token: 'third' });
    expect(replay.status).toBe('completed');
    expect(replay.status === 'completed' && replay.response.body.equals(body)).toBe(true);
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
