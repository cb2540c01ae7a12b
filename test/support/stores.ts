import type { IdempotencyModuleOptions } from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from './postgres';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from './redis';

/** A store a suite runs its cases against, by name. */
export interface StoreCase {
  name: string;
  /** The module options that select it. */
  options: () => IdempotencyModuleOptions;
}

/**
 * The memory, Redis and PostgreSQL stores under a key prefix and a table of `name`'s own, and
 * the `afterAll` step that removes what they stored.
 */
export function threeStores(name: string): { stores: StoreCase[]; cleanUp: () => Promise<void> } {
  const redisPrefix = uniquePrefix(name);
  const table = uniqueTable(name);
  return {
    stores: [
      { name: 'memory', options: () => ({}) },
      { name: 'Redis', options: () => ({ redis: testRedisUrl(), keyPrefix: redisPrefix }) },
      {
        name: 'PostgreSQL',
        options: () => ({
          postgres: { connectionString: testPostgresUrl(), table, ensureSchema: true },
        }),
      },
    ],
    async cleanUp() {
      await cleanUpPrefix(redisPrefix);
      const pool = await testPool();
      await dropTable(pool, table);
      await pool.end();
    },
  };
}
