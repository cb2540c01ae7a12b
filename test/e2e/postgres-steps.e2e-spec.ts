import type { Pool } from 'pg';
import { PostgresIdempotencyStore } from '../../lib';
import { dropTable, testPool, uniqueTable } from '../support/postgres';
import { runStepCases } from '../support/step-cases';

let pool: Pool;
const table = uniqueTable('steps');

runStepCases({
  name: 'PostgreSQL',
  createStore: async () => {
    pool = await testPool();
    return new PostgresIdempotencyStore(pool, { table, ensureSchema: true });
  },
  closeStore: async (store) => {
    await store.close();
    await dropTable(pool, table);
    await pool.end();
  },
});
