import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';

/** URL of the Redis the suite runs against (set by the Jest global setup). */
export function testRedisUrl(): string {
  const url = process.env.IDEMPOTENCY_TEST_REDIS_URL;
  if (!url)
    throw new Error('IDEMPOTENCY_TEST_REDIS_URL is not set: run the tests through jest.config.js');
  return url;
}

/** A key prefix of its own for each suite, so tests never touch anyone else's keys. */
export function uniquePrefix(name: string): string {
  return `test:idempotency:${name}:${randomUUID().slice(0, 8)}:`;
}

/** An inspection client, to look at what the module stored. */
export function inspectionClient(): Redis {
  return new Redis(testRedisUrl(), { lazyConnect: false, maxRetriesPerRequest: 1 });
}

/** Every key under a prefix (SCAN, never KEYS), for assertions on what was stored. */
export async function keysUnder(client: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** Deletes a suite's keys when it ends (never FLUSHDB: the Redis may be shared). */
export async function deleteKeysUnder(client: Redis, prefix: string): Promise<void> {
  const keys = await keysUnder(client, prefix);
  if (keys.length > 0) await client.del(...keys);
}

/** Deletes a suite's keys under `prefix` through a client of its own (an `afterAll` step). */
export async function cleanUpPrefix(prefix: string): Promise<void> {
  const client = inspectionClient();
  try {
    await deleteKeysUnder(client, prefix);
  } finally {
    await client.quit();
  }
}

/** The stores the HTTP suites run each case against. */
export const STORES = ['memory', 'redis'] as const;

/** The module options of one of {@link STORES}, under a key prefix of the suite's own. */
export function storeOptions(
  store: (typeof STORES)[number],
  keyPrefix: string,
): { keyPrefix: string; redis?: string } {
  return store === 'redis' ? { keyPrefix, redis: testRedisUrl() } : { keyPrefix };
}
