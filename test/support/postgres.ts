import { randomUUID } from 'node:crypto';
import { Pool, type PoolConfig } from 'pg';
import { postgresStepsTableName } from '../../lib/stores/postgres/postgres-steps';

/** The PostgreSQL the suites use: IDEMPOTENCY_TEST_POSTGRES_URL, else the local `test` database. */
export function testPostgresUrl(): string {
  return process.env.IDEMPOTENCY_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
}

/** A table name of the suite's own, so tests never touch anyone else's tables. */
export function uniqueTable(name: string): string {
  return `idempotency_test_${name}_${randomUUID().slice(0, 8)}`;
}

/**
 * A pool on the test database, checked with a query: when PostgreSQL is not there the suite
 * fails with a message naming it, in CI and locally alike (never a silent skip).
 */
export async function testPool(config: PoolConfig = {}): Promise<Pool> {
  const url = testPostgresUrl();
  const pool = new Pool({ connectionString: url, connectionTimeoutMillis: 5_000, ...config });
  pool.on('error', () => {}); // An idle connection cut by a test must not crash the run.
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new Error(
      `nestjs-idempotency tests need PostgreSQL at ${url} (trust auth, database test): ` +
        `${(error as Error).message}. Start it (.ci/run installs and starts it) or set ` +
        'IDEMPOTENCY_TEST_POSTGRES_URL.',
    );
  }
  return pool;
}

/**
 * Drops a suite's table (and with it its index) when the suite ends, and the steps table that
 * ensureSchema creates beside it.
 */
export async function dropTable(pool: Pool, table: string): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS "${table}", "${postgresStepsTableName(table)}"`);
}

/** Host and port of the test PostgreSQL, from its URL. */
export function testPostgresAddress(): { host: string; port: number } {
  const url = new URL(testPostgresUrl());
  return { host: url.hostname || '127.0.0.1', port: Number(url.port || 5432) };
}

/** The test database's URL with another host port: a proxy's, or one nothing listens on. */
export function testPostgresUrlAt(port: number): string {
  const url = new URL(testPostgresUrl());
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}
