import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { packageFolder } from '../../lib/utils/load-optional';
import { RedisProcess, startRedisServer } from '../support/redis-server';

/**
 * A script of the release before this one (script version 6), kept in test/support/lua-v6 (found
 * from the package root: ESM tests have no __dirname).
 */
function v6Script(file: string): string {
  const read = (name: string) =>
    readFileSync(join(packageFolder('test'), 'support', 'lua-v6', `${name}.lua`), 'utf8');
  return read(file).replace(/^[ \t]*--- @include ([\w-]+)[ \t]*$/gm, (_, name: string) =>
    read(name),
  );
}

/**
 * A rolling upgrade from the release with script version 6: instances of both serve the same
 * keys for a while. What docs/stores.md says of it holds.
 */
describe('a rolling upgrade from script version 6', () => {
  let server: RedisProcess;
  let client: Redis;
  let store: RedisIdempotencyStore;

  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url);
    store = new RedisIdempotencyStore(new Redis(server.url), { ownsClient: true });
  });
  afterAll(async () => {
    await store.close();
    client.disconnect();
    await server.stop();
  });

  it("a 409's Retry-After follows a heartbeat a version 6 instance sent", async () => {
    const key = 'app:{beat}';
    const claimedAt = Date.now();
    await store.claim(key, { token: 'a', fingerprint: 'f', leaseMs: 300 });
    // The owner, a version 6 instance, renews its lease to 60 s, and the lease end the record
    // keeps from its claim passes.
    expect(await client.eval(v6Script('extend-2'), 2, key, 'app:ix:runs', 'a', 60_000)).toBe(1);
    while (Date.now() <= claimedAt + 300) await client.ping();
    const duplicate = await store.claim(key, { token: 'b', fingerprint: 'f', leaseMs: 30_000 });
    expect(duplicate.status === 'in_progress' && duplicate.retryAfterMs).toBeGreaterThan(50_000);
  });

  it("a version 6 instance's waiting duplicate leaves a record with its body apart as it was", async () => {
    const key = 'app:{waited}';
    await store.claim(key, { token: 'a', fingerprint: 'f', leaseMs: 30_000 });
    const body = Buffer.alloc(8192, 'w');
    expect(await store.complete(key, 'a', { meta: '{}', body }, 60_000)).toBe(true);
    // Version 6 does not know 'C': 409 (in progress) to a caller that waits, and nothing written.
    const args = ['w', 'f', 30_000, '1', '', '', '{waited}'];
    const reply = (await client.eval(v6Script('claim-2'), 2, key, 'app:ix:runs', ...args)) as [
      number,
    ];
    expect(reply[0]).toBe(2);
    const replay = await store.claim(key, { token: 'b', fingerprint: 'f', leaseMs: 30_000 });
    expect(replay.status === 'completed' && replay.response.body.equals(body)).toBe(true);
  });

  it('replays what a version 6 instance completed, and answers a 422 of it', async () => {
    const key = 'app:{v6}';
    await store.claim(key, { token: 'a', fingerprint: 'f', leaseMs: 30_000 });
    const body = Buffer.alloc(8192, 'x'); // inline: version 6 never stores a body apart
    const keys = ['app:ix:runs', 'app:ix:ttls', 'app:ix:done:60000'];
    const args = ['a', '{}', body, 60_000, 'PUBLISH', '1', '{v6}'];
    expect(await client.eval(v6Script('complete-4'), 4, key, ...keys, ...args)).toBe(1);
    const replay = await store.claim(key, { token: 'b', fingerprint: 'f', leaseMs: 30_000 });
    expect(replay.status === 'completed' && replay.response.body.equals(body)).toBe(true);
    const reused = await store.claim(key, { token: 'c', fingerprint: 'g', leaseMs: 30_000 });
    expect(reused).toEqual({ status: 'key_reused' });
  });
});
