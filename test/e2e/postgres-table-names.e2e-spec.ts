import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { PostgresIdempotencyStore } from '../../lib';
import { dropTable, testPool } from '../support/postgres';

/**
 * `table` may be "at most 63 characters in all" (docs/postgres.md). ensureSchema names the
 * expiry index `<table>_expires_at_idx`, which PostgreSQL cuts to 63 characters: at 63 it is
 * the table's own name, so `CREATE INDEX IF NOT EXISTS` finds "a relation of that name" and
 * silently creates nothing. The sweeper then scans the whole table every interval.
 */
describe('PostgresIdempotencyStore: long table names accepted by validation', () => {
  let pool: Pool;
  const tables: string[] = [];

  beforeAll(async () => {
    pool = await testPool();
  });
  afterAll(async () => {
    for (const table of tables) await dropTable(pool, table);
    await pool.end();
  });

  /** A valid table name of `length` characters, unique to this run, starting with `stem`. */
  const name = (stem: string, length: number) => {
    const base = `idempotency_test_${stem}_${randomUUID().replaceAll('-', '')}`;
    return base.padEnd(length, 'x').slice(0, length);
  };

  const expiryIndexes = async (table: string) =>
    (
      await pool.query<{ indexdef: string }>(
        `SELECT indexdef FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%(expires_at)%'`,
        [table],
      )
    ).rows.length;

  const ensure = async (table: string) => {
    tables.push(table);
    const store = new PostgresIdempotencyStore(pool, {
      table,
      ensureSchema: true,
      sweepIntervalMs: 0,
    });
    try {
      expect(await store.whenReady(5_000)).toBe(true);
    } finally {
      await store.close();
    }
  };

  it('creates the expiry index for a 63-character table name', async () => {
    const table = name('a', 63);
    await ensure(table);
    expect(await expiryIndexes(table)).toBe(1);
  });
});
