import { rm } from 'node:fs/promises';
import { RUN_DIR_ENV, reapLeftoverRedisServers, type TestRedisGlobals } from './redis-server';

/**
 * Jest globalTeardown: stops the throwaway redis-server globalSetup started, if it started one,
 * then kills any server a test left running and removes the run directory.
 */
export default async function globalTeardown(): Promise<void> {
  const holder = globalThis as TestRedisGlobals;
  const stop = holder.__IDEMPOTENCY_REDIS_STOP__;
  holder.__IDEMPOTENCY_REDIS_STOP__ = undefined;
  await stop?.();

  const runDir = process.env[RUN_DIR_ENV];
  if (runDir === undefined || runDir === '') return;
  const leftovers = await reapLeftoverRedisServers(runDir);
  if (leftovers.length > 0) {
    // A warning rather than a failure: the run's own results already say whether tests passed;
    // this points at the suite that forgot its afterAll.
    console.warn(
      `nestjs-idempotency tests: killed ${leftovers.length} redis-server process(es) a test ` +
        `left running (pids ${leftovers.join(', ')}); stop them in afterAll.`,
    );
  }
  await rm(runDir, { recursive: true, force: true });
  delete process.env[RUN_DIR_ENV];
}
