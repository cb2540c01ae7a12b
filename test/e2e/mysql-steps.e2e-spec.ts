import type { Pool } from 'mysql2/promise';
import { MysqlIdempotencyStore } from '../../lib';
import { dropMysqlTable, testMysqlPool, uniqueMysqlTable } from '../support/mysql';
import { runStepCases } from '../support/step-cases';

let pool: Pool;
const table = uniqueMysqlTable('steps');

runStepCases({
  name: 'MariaDB',
  createStore: async () => {
    pool = await testMysqlPool();
    return new MysqlIdempotencyStore(pool, { table, ensureSchema: true });
  },
  closeStore: async (store) => {
    await store.close();
    await dropMysqlTable(pool, table);
    await pool.end();
  },
});
