import type { Pool } from 'mysql2/promise';
import { MysqlIdempotencyStore } from '../../lib';
import { runIdempotencyStoreContract } from '../../lib/testing';
import { dropMysqlTable, testMysqlPool, uniqueMysqlTable } from '../support/mysql';

const realTime = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let pool: Pool;
const table = uniqueMysqlTable('contract');

runIdempotencyStoreContract({
  name: 'MysqlIdempotencyStore on MariaDB',
  createStore: async () => {
    pool = await testMysqlPool();
    return new MysqlIdempotencyStore(pool, { table, ensureSchema: true });
  },
  closeStore: async (store) => {
    await store.close();
    await dropMysqlTable(pool, table);
    await pool.end();
  },
  advanceTime: realTime,
});
