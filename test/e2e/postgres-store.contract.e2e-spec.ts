import type { Pool } from 'pg';
import { PostgresIdempotencyStore } from '../../lib';
import { runIdempotencyStoreContract } from '../../lib/testing';
import { dropTable, testPool, uniqueTable } from '../support/postgres';

const realTime = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let pool: Pool;
const table = uniqueTable('contract');

runIdempotencyStoreContract({
  name: 'PostgresIdempotencyStore on PostgreSQL',
  createStore: async () => {
    pool = await testPool();
    return new PostgresIdempotencyStore(pool, { table, ensureSchema: true });
  },
  closeStore: async (store) => {
    await store.close();
    await dropTable(pool, table);
    await pool.end();
  },
  advanceTime: realTime,
});
