import { drizzle } from 'drizzle-orm/node-postgres';
import { Kysely, PostgresDialect } from 'kysely';
import { Pool } from 'pg';
import { queryableTransaction } from '../../lib/stores/sql/transaction';

// Nothing connects: the pools are created and ended unused.
describe('queryableTransaction', () => {
  const pool = new Pool();
  afterAll(() => pool.end());

  it('refuses a Kysely instance that is not a transaction', () => {
    const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
    expect(() => queryableTransaction(db)).toThrow(/a Kysely instance, not a transaction/);
  });

  it('refuses a Drizzle database that is not a transaction', () => {
    expect(() => queryableTransaction(drizzle({ client: pool }))).toThrow(
      /a Drizzle database, not a transaction/,
    );
  });

  it('hands other handles over unchanged', () => {
    const client = { query: async () => ({ rows: [] }) };
    expect(queryableTransaction(client)).toBe(client);
  });
});
