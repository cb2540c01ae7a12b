import Redis from 'ioredis';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { AppProcess, buildLibrary } from './app-process';

/**
 * docs/jobs.md's cron recipe: three replicas of an app (fixtures/cron-process.js) on one Redis
 * fire the same `@Cron` every second, and run the work through `IdempotencyService.run()` keyed
 * by the job's name and the tick's scheduled time. Every tick all three fired must have run the
 * work exactly once. RELIABILITY_FULL=1 watches more ticks.
 */
const TICKS = process.env.RELIABILITY_FULL === '1' ? 30 : 6;

describe('a @Cron job on three replicas', () => {
  const prefix = uniquePrefix('cron');
  const replicas: AppProcess[] = [];
  let redis: Redis;

  beforeAll(async () => {
    buildLibrary();
    redis = inspectionClient();
    await redis.ping().catch((error: Error) => {
      throw new Error(`this test needs Redis at ${testRedisUrl()}: ${error.message}`);
    });
  }, 120_000);
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop('SIGKILL')));
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
  });

  it('runs the work once per tick', async () => {
    const env = { REDIS_URL: testRedisUrl(), KEY_PREFIX: prefix };
    replicas.push(
      ...(await Promise.all([1, 2, 3].map(() => AppProcess.start(env, 'cron-process.js')))),
    );
    // Ticks every replica fired: from the first tick after all three started, TICKS of them.
    const firsts = await Promise.all(replicas.map((r) => r.waitForLine(/^TICK /)));
    const start = firsts.map((line) => line.split(' ')[1]).sort()[2];
    const at = (n: number) => new Date(Date.parse(start) + n * 1_000).toISOString();
    const last = at(TICKS);
    await Promise.all(replicas.map((r) => r.waitForLine(new RegExp(`^TICK ${last} `))));

    const ticks = Array.from({ length: TICKS }, (_, n) => at(n + 1));
    const perTick = ticks.map((tick) => {
      const lines = replicas.flatMap((r) => r.reports('TICK').filter((l) => l.startsWith(tick)));
      return { tick, fired: lines.length, ran: lines.filter((l) => l.endsWith(' ran')).length };
    });
    console.log(`cron test: ${JSON.stringify(perTick)}`);
    expect(perTick).toEqual(ticks.map((tick) => ({ tick, fired: 3, ran: 1 })));
  }, 60_000);
});
