import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUN_DIR_ENV, resolveTestRedis, type TestRedisGlobals } from './redis-server';

/**
 * Jest globalSetup: picks the Redis every suite talks to (REDIS_URL, a local 6379, or a throwaway
 * redis-server) once per run. Workers are forked after this returns, so they inherit the env vars.
 */
export default async function globalSetup(): Promise<void> {
  // First, so that the throwaway server and every server the suites start land in it.
  process.env[RUN_DIR_ENV] = await mkdtemp(join(tmpdir(), 'nestjs-idempotency-run-'));
  const redis = await resolveTestRedis();
  process.env.IDEMPOTENCY_TEST_REDIS_URL = redis.url;
  // globalSetup and globalTeardown share this process's globalThis, so the stop function can be
  // handed over without touching the environment.
  (globalThis as TestRedisGlobals).__IDEMPOTENCY_REDIS_STOP__ = redis.stop;
}
