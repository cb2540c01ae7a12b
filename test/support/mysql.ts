import { randomUUID } from 'node:crypto';
import { createPool, type Pool, type PoolOptions } from 'mysql2/promise';
import { mysqlStepsTableName } from '../../lib/stores/mysql/mysql-steps';

/** The MariaDB/MySQL the suites use: IDEMPOTENCY_TEST_MYSQL_URL, else the local `test` database. */
export function testMysqlUrl(): string {
  return process.env.IDEMPOTENCY_TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
}

/** A table name of the suite's own, so tests never touch anyone else's tables. */
export function uniqueMysqlTable(name: string): string {
  return `idempotency_test_${name}_${randomUUID().slice(0, 8)}`;
}

/**
 * A mysql2 pool on the test database, checked with a query: when MariaDB is not there the suite
 * fails with a message naming it, in CI and locally alike (never a silent skip).
 */
export async function testMysqlPool(config: PoolOptions = {}): Promise<Pool> {
  const url = testMysqlUrl();
  const pool = createPool({ uri: url, connectTimeout: 5_000, ...config });
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new Error(
      `nestjs-idempotency tests need MariaDB (or MySQL) at ${url} (user root, no password, ` +
        `database test): ${(error as Error).message}. Start it (.ci/run installs and starts ` +
        'MariaDB) or set IDEMPOTENCY_TEST_MYSQL_URL.',
    );
  }
  return pool;
}

/** Drops a suite's table when the suite ends, and the steps table ensureSchema creates beside it. */
export async function dropMysqlTable(pool: Pool, table: string): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS \`${table}\`, \`${mysqlStepsTableName(table)}\``);
}
