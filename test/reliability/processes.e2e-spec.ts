import Redis from 'ioredis';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';
import { AppProcess, buildLibrary } from './app-process';

/**
 * Exactly-once across real processes sharing one Redis. Executions are counted in a Redis counter
 * the handler increments (a side channel), never through the module. RELIABILITY_FULL=1 (npm run
 * test:reliability) runs the storm at full size: 1 000 requests x 100 keys over 4 processes.
 */
const FULL = process.env.RELIABILITY_FULL === '1';
const STORM = FULL ? { keys: 100, requests: 1_000 } : { keys: 10, requests: 200 };

describe('exactly once across processes', () => {
  const prefix = uniquePrefix('processes');
  const counterKey = `${prefix}counter`;
  let redis: Redis;

  beforeAll(() => {
    buildLibrary();
    redis = inspectionClient();
  }, 120_000);
  afterAll(async () => {
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
  });

  const start = (lockTtl = 30_000) =>
    AppProcess.start({
      REDIS_URL: testRedisUrl(),
      KEY_PREFIX: prefix,
      LOCK_TTL: String(lockTtl),
      COUNTER_KEY: counterKey,
    });
  const executions = async () => Number(await redis.get(counterKey));

  it(`storm: ${STORM.requests} concurrent same-key requests over 4 processes run once, for each of ${STORM.keys} keys`, async () => {
    const apps = await Promise.all([start(), start(), start(), start()]);
    try {
      for (let trial = 0; trial < STORM.keys; trial++) {
        const before = await executions();
        const key = `storm-${Date.now()}-${trial}`;
        const responses = await Promise.all(
          Array.from({ length: STORM.requests }, (_, i) =>
            post(apps[i % apps.length].url, '/work', { key, headers: { 'x-delay-ms': '20' } }),
          ),
        );
        expect((await executions()) - before).toBe(1);
        const created = responses.filter((r) => r.status === 201);
        expect(created.length + responses.filter((r) => r.status === 409).length).toBe(
          STORM.requests,
        );
        for (const response of created) expect(response.text).toBe(created[0].text);
      }
    } finally {
      await Promise.all(apps.map((app) => app.stop()));
    }
  }, 600_000);

  it('zombie: a frozen owner whose lease was taken over is fenced; the heir’s result stays', async () => {
    const [a, b] = await Promise.all([start(1_000), start(1_000)]);
    try {
      const key = `zombie-${Date.now()}`;
      const zombie = post(a.url, '/work', { key, headers: { 'x-delay-ms': '500' } });
      await a.waitForLine(new RegExp(`^STARTED ${key}$`));
      process.kill(a.pid, 'SIGSTOP'); // no heartbeat can run now
      const [claimed] = a.events('claimed').map((line) => JSON.parse(line.slice(6)).key as string);
      // The lease runs out in Redis while A is frozen (a real expiry, not a deletion).
      while ((await redis.exists(claimed)) === 1) await new Promise((r) => setTimeout(r, 100));
      const heir = await post(b.url, '/work', { key, headers: { 'x-delay-ms': '500' } });
      expect(heir.status).toBe(201);
      process.kill(a.pid, 'SIGCONT');
      const zombieResponse = await zombie;
      expect(zombieResponse.status).toBe(201);
      expect(zombieResponse.text).not.toBe(heir.text);
      await a.waitForLine(/"type":"fenced"/);
      for (const app of [a, b]) {
        const replay = await post(app.url, '/work', { key, headers: { 'x-delay-ms': '500' } });
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.text).toBe(heir.text);
      }
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  }, 60_000);

  it('crash: a SIGKILLed owner frees its key when the lease ends, not after the result ttl', async () => {
    const [a, b] = await Promise.all([start(1_000), start(1_000)]);
    try {
      const key = `crash-${Date.now()}`;
      const doomed = post(a.url, '/work', { key, headers: { 'x-delay-ms': '10000' } }).catch(
        (e) => e,
      );
      await a.waitForLine(new RegExp(`^STARTED ${key}$`));
      const before = await executions();
      await a.stop('SIGKILL');
      expect(String(await doomed)).toMatch(/fetch failed/);
      const [claimed] = a.events('claimed').map((line) => JSON.parse(line.slice(6)).key as string);
      const ttl = await redis.pttl(claimed);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1_000);
      expect((await post(b.url, '/work', { key })).status).toBe(409);
      while ((await redis.exists(claimed)) === 1) await new Promise((r) => setTimeout(r, 100));
      const retry = await post(b.url, '/work', { key });
      expect(retry.status).toBe(201);
      expect((await executions()) - before).toBe(1);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  }, 60_000);
});
