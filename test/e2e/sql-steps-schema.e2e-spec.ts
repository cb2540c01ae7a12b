import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool as PgPool } from 'pg';
import {
  mysqlListingSchemaSql,
  mysqlSchemaSql,
  MysqlIdempotencyStore,
  mysqlStepsTableName,
  postgresListingSchemaSql,
  postgresSchemaSql,
  PostgresIdempotencyStore,
  postgresStepsTableName,
  type TransactionalIdempotencyStore,
} from '../../lib';
import { packageFolder } from '../../lib/utils/load-optional';
import { dropMysqlTable, testMysqlPool, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, uniqueTable } from '../support/postgres';
import { step, stepsOf } from '../support/step-cases';

/**
 * The steps table of the SQL stores: created by ensureSchema and by the migration
 * `sql/<database>/002_idempotency_steps.sql` alike; needed only by resumable runs (without it,
 * every other call works, and a resumable one fails naming the migration); swept like the
 * records; named to fit beside a records' table of the longest name the database keeps.
 */

type Store = TransactionalIdempotencyStore & { close(): Promise<void>; sweep(): Promise<number> };

interface Database {
  name: string;
  folder: string;
  uniqueTable: (name: string) => string;
  /** The longest table name the store takes (without a schema). */
  longest: number;
  stepsTableName: (table: string) => string;
  store: (table: string, ensureSchema: boolean) => Store;
  /** Runs a script of statements (a migration file) as it is. */
  script: (sql: string) => Promise<void>;
  /** The table's definition, its own name replaced by T. */
  definition: (table: string) => Promise<unknown>;
  /** Creates the records' table alone (migrations 001 and 003, without 002). */
  createRecords: (table: string) => Promise<void>;
  count: (table: string) => Promise<number>;
  drop: (table: string) => Promise<void>;
  /** A transaction of the driver itself, for recordStepInTransaction. */
  transaction: (fn: (tx: unknown) => Promise<void>) => Promise<void>;
}

let pg: PgPool;
let my: MysqlPool;
const drops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [pg, my] = await Promise.all([testPool(), testMysqlPool({ multipleStatements: true })]);
});
afterAll(async () => {
  for (const drop of drops) await drop();
  await Promise.all([pg.end(), my.end()]);
});

const databases: Database[] = [
  {
    name: 'PostgreSQL',
    folder: 'postgres',
    uniqueTable,
    longest: 63,
    stepsTableName: postgresStepsTableName,
    store: (table, ensureSchema) =>
      new PostgresIdempotencyStore(pg, { table, ensureSchema, sweepIntervalMs: 0 }),
    script: async (sql) => void (await pg.query(sql)),
    definition: async (table) => {
      const columns = await pg.query(
        `SELECT attname, format_type(atttypid, atttypmod) AS type, attnotnull
         FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped
         ORDER BY attnum`,
        [`"${table}"`],
      );
      const indexes = await pg.query(
        `SELECT replace(indexdef, $1, 'T') AS definition FROM pg_indexes WHERE tablename = $1
         ORDER BY indexname`,
        [table],
      );
      return { columns: columns.rows, indexes: indexes.rows };
    },
    createRecords: async (table) => {
      await pg.query(postgresSchemaSql(table));
      await pg.query(postgresListingSchemaSql(table));
    },
    count: async (table) =>
      (await pg.query(`SELECT count(*)::int AS n FROM "${table}"`)).rows[0].n as number,
    drop: (table) => dropTable(pg, table),
    transaction: async (fn) => {
      const client = await pg.connect();
      try {
        await client.query('BEGIN');
        await fn(client);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    },
  },
  {
    name: 'MariaDB',
    folder: 'mysql',
    uniqueTable: uniqueMysqlTable,
    longest: 64,
    stepsTableName: mysqlStepsTableName,
    store: (table, ensureSchema) =>
      new MysqlIdempotencyStore(my, { table, ensureSchema, sweepIntervalMs: 0 }),
    script: async (sql) => void (await my.query(sql)),
    definition: async (table) => {
      const [rows] = await my.query(`SHOW CREATE TABLE \`${table}\``);
      return (rows as Record<string, string>[])[0]['Create Table'].replaceAll(table, 'T');
    },
    createRecords: async (table) => {
      await my.query(mysqlSchemaSql(table));
      await my.query(mysqlListingSchemaSql(table));
    },
    count: async (table) => {
      const [rows] = await my.query(`SELECT COUNT(*) AS n FROM \`${table}\``);
      return Number((rows as { n: number }[])[0].n);
    },
    drop: (table) => dropMysqlTable(my, table),
    transaction: async (fn) => {
      const connection = await my.getConnection();
      try {
        await connection.beginTransaction();
        await fn(connection);
        await connection.commit();
      } catch (error) {
        await connection.rollback();
        throw error;
      } finally {
        connection.release();
      }
    },
  },
];

const key = () => `steps:{${randomUUID()}}`;
const claim = (token: string, resumable = true) => ({
  token,
  fingerprint: 'fp',
  leaseMs: 60_000,
  resumable,
});
const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe.each(databases)('$name: the steps table', (database) => {
  const tableFor = (name: string) => {
    const table = database.uniqueTable(name);
    drops.push(() => database.drop(table));
    return table;
  };

  it('is what both the migration (applied twice, renamed) and ensureSchema create', async () => {
    const read = (file: string) =>
      readFileSync(join(packageFolder('sql'), database.folder, file), 'utf8');
    const migrated = tableFor('migrated');
    for (let i = 0; i < 2; i++) {
      await database.script(
        read('001_idempotency_records.sql').replaceAll('idempotency_records', migrated),
      );
      await database.script(
        read('002_idempotency_steps.sql').replaceAll('idempotency_records', migrated),
      );
    }
    // Once: MySQL's ALTER TABLE of 003 cannot run twice.
    await database.script(
      read('003_idempotency_listing.sql').replaceAll('idempotency_records', migrated),
    );
    const ensured = database.store(tableFor('ensured'), true);
    expect(await ensured.whenReady!(5_000)).toBe(true);
    const ensuredTable = (ensured as unknown as { table: string }).table;
    expect(await database.definition(database.stepsTableName(ensuredTable))).toEqual(
      await database.definition(database.stepsTableName(migrated)),
    );
    await ensured.close();

    // A store without ensureSchema resumes on the migrated tables.
    const store = database.store(migrated, false);
    const k = key();
    await store.claim(k, claim('a'));
    expect(await store.recordStep!(k, 'a', step(0, 'order'), 60_000)).toBe(true);
    await store.release(k, 'a');
    expect(stepsOf(await store.claim(k, claim('b')))).toHaveLength(1);
    await store.close();
  });

  it('is needed by resumable runs only: the others work without it', async () => {
    const table = tableFor('no_steps');
    await database.createRecords(table);
    const store = database.store(table, false);
    try {
      const k = key();
      expect(await store.claim(k, claim('a', false))).toEqual({ status: 'claimed' });
      expect(await store.extend(k, 'a', 60_000)).toBe(true);
      expect(await store.inspect(k)).toMatchObject({ state: 'pending' });
      expect(await store.complete(k, 'a', step(9, 'r').result, 60_000)).toBe(true);
      expect(await store.delete(k)).toBe(true);
      expect(await store.sweep()).toBe(0);

      const migration = `sql/${database.folder}/002_idempotency_steps.sql`;
      const steps = database.stepsTableName(table);
      const missing = new RegExp(`the table "${steps}" does not exist.*Apply ${migration}`);
      const r = key();
      await expect(store.claim(r, claim('a'))).rejects.toThrow(missing);
      // The failed claim left the key free.
      expect(await store.claim(r, claim('a', false))).toEqual({ status: 'claimed' });
      await expect(store.recordStep!(r, 'a', step(0, 'order'), 60_000)).rejects.toThrow(missing);
      await expect(
        database.transaction((tx) =>
          store.recordStepInTransaction!(tx, r, 'a', step(0, 'order'), 60_000).then(() => {}),
        ),
      ).rejects.toThrow(missing);
      const clear = { clearSteps: true };
      await expect(store.complete(r, 'a', step(9, 'r').result, 60_000, clear)).rejects.toThrow(
        missing,
      );
      // Nothing was completed: the run can still complete the ordinary way.
      expect(await store.complete(r, 'a', step(9, 'r').result, 60_000)).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('is swept of expired steps, once the store has used steps', async () => {
    const table = tableFor('sweep');
    const store = database.store(table, true);
    try {
      const [short, long] = [key(), key()];
      await store.claim(short, claim('a'));
      await store.claim(long, claim('a'));
      for (let i = 0; i < 3; i++) {
        await store.recordStep!(short, 'a', step(i, `short-${i}`), 50);
        await store.recordStep!(long, 'a', step(i, `long-${i}`), 60_000);
      }
      await wait(150);
      expect(await store.sweep()).toBe(3);
      expect(await database.count(database.stepsTableName(table))).toBe(3);
      expect(await store.inspect(long)).toMatchObject({ state: 'pending' });
    } finally {
      await store.close();
    }
  });

  it('fits beside a records’ table whose name is as long as the database keeps', async () => {
    const table = `${tableFor('long')}_${'x'.repeat(64)}`.slice(0, database.longest);
    drops.push(() => database.drop(table));
    const steps = database.stepsTableName(table);
    expect(steps.length).toBeLessThanOrEqual(database.longest);
    expect(steps).toMatch(/_[0-9a-f]{8}_steps$/);
    const store = database.store(table, true);
    try {
      const k = key();
      await store.claim(k, claim('a'));
      expect(await store.recordStep!(k, 'a', step(0, 'order'), 60_000)).toBe(true);
      await store.release(k, 'a');
      expect(stepsOf(await store.claim(k, claim('b')))).toHaveLength(1);
      expect(await database.count(steps)).toBe(1);
    } finally {
      await store.close();
    }
  });
});
