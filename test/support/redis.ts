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

/**
 * The keys of records (and their steps) under a prefix: every key but the listing index the
 * scripts keep beside them (`<prefix>ix:...`, or `<prefix>ix{tag}:...` on a Cluster).
 */
export async function recordKeysUnder(client: Redis, prefix: string): Promise<string[]> {
  const index = [`${prefix}ix:`, `${prefix}ix{`];
  return (await keysUnder(client, prefix)).filter((key) => !index.some((i) => key.startsWith(i)));
}

/**
 * Every byte stored under a prefix, whatever the key's type (the records' strings, the listing
 * index's hashes, lists and sets): what a check that nothing secret reached the store reads.
 */
export async function bytesUnder(client: Redis, prefix: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const key of await keysUnder(client, prefix)) {
    const type = await client.type(key);
    if (type === 'string') parts.push((await client.getBuffer(key)) ?? Buffer.alloc(0));
    else if (type === 'hash') parts.push(...Object.values(await client.hgetallBuffer(key)));
    else if (type === 'list') parts.push(...(await client.lrangeBuffer(key, 0, -1)));
    else if (type === 'set') parts.push(...(await client.smembersBuffer(key)));
    else if (type === 'zset') parts.push(...(await client.zrangeBuffer(key, '0', '-1')));
    else throw new Error(`bytesUnder: ${key} is a ${type}, which it cannot read`);
  }
  return Buffer.concat(parts);
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
