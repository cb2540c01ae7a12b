import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import knex from 'knex';
import { Kysely, MysqlDialect, PostgresDialect } from 'kysely';
import { createPool as createMysqlCallbackPool } from 'mysql2';
import { createPool as createMysqlPool, type Pool as MysqlPool } from 'mysql2/promise';
import { randomUUID } from 'node:crypto';
import { Pool, type Pool as PgPool } from 'pg';
import {
  MysqlIdempotencyStore,
  PostgresIdempotencyStore,
  type StoredResponse,
  type TransactionalIdempotencyStore,
} from '../../lib';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';

/**
 * Each SQL store's completeInTransaction takes the handle an app's TransactionHost exposes as
 * `tx`, whatever the ORM, and writes through it: the completion commits with the transaction and
 * rolls back with it. Here Drizzle, Kysely and Knex transactions go to the store as they are, on
 * PostgreSQL and on MariaDB (TypeORM, node-postgres, mysql2 and Prisma have suites of their own).
 */

/** An ORM opened on one database: its transaction, run the ORM's own way, and its database. */
interface Orm {
  transaction(fn: (tx: unknown) => Promise<void>): Promise<void>;
  /**
   * The ORM's database object, outside any transaction; undefined for Knex, whose instance
   * cannot be told from a transaction.
   */
  outside?: unknown;
  close(): Promise<void>;
}

interface Database {
  name: string;
  store: () => TransactionalIdempotencyStore & { close(): Promise<void> };
  orms: Record<string, () => Orm>;
}

/** The ORMs whose database, outside a transaction, the stores can tell and refuse. */
const REFUSED_OUTSIDE = ['Drizzle', 'Kysely', 'Kysely (controlled transaction)'];

let pg: PgPool;
let my: MysqlPool;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [pg, my] = await Promise.all([testPool(), testMysqlPool()]);
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await Promise.all([pg.end(), my.end()]);
});

/** Kysely: both `transaction().execute()` and the controlled transaction the cls adapter uses. */
function kysely(db: Kysely<unknown>, controlled: boolean): Orm {
  return {
    outside: db,
    transaction: controlled
      ? async (fn) => {
          const trx = await db.startTransaction().execute();
          try {
            await fn(trx);
            await trx.commit().execute();
          } catch (error) {
            await trx.rollback().execute();
            throw error;
          }
        }
      : (fn) => db.transaction().execute(fn),
    close: () => db.destroy(),
  };
}

const databases: Database[] = [
  {
    name: 'PostgreSQL',
    store: () => {
      const table = uniqueTable('handles');
      const store = new PostgresIdempotencyStore(pg, { table, ensureSchema: true });
      cleanups.push(() => dropTable(pg, table));
      return store;
    },
    orms: {
      Drizzle: () => {
        const db = drizzlePg({ connection: testPostgresUrl() });
        return {
          outside: db,
          transaction: (fn) => db.transaction(fn),
          close: () => db.$client.end(),
        };
      },
      Kysely: () => kysely(new Kysely({ dialect: new PostgresDialect({ pool: pgPool() }) }), false),
      'Kysely (controlled transaction)': () =>
        kysely(new Kysely({ dialect: new PostgresDialect({ pool: pgPool() }) }), true),
      Knex: () => {
        const db = knex({ client: 'pg', connection: testPostgresUrl() });
        return {
          transaction: (fn) => db.transaction((trx) => fn(trx)),
          close: () => db.destroy(),
        };
      },
    },
  },
  {
    name: 'MariaDB',
    store: () => {
      const table = uniqueMysqlTable('handles');
      const store = new MysqlIdempotencyStore(my, { table, ensureSchema: true });
      cleanups.push(() => dropMysqlTable(my, table));
      return store;
    },
    orms: {
      Drizzle: () => {
        const pool = createMysqlPool({ uri: testMysqlUrl() });
        const db = drizzleMysql({ client: pool });
        return {
          outside: db,
          transaction: (fn) => db.transaction(fn),
          close: () => pool.end(),
        };
      },
      Kysely: () =>
        kysely(new Kysely({ dialect: new MysqlDialect({ pool: mysqlCallbackPool() }) }), false),
      'Kysely (controlled transaction)': () =>
        kysely(new Kysely({ dialect: new MysqlDialect({ pool: mysqlCallbackPool() }) }), true),
      Knex: () => {
        const db = knex({ client: 'mysql2', connection: testMysqlUrl() });
        return {
          transaction: (fn) => db.transaction((trx) => fn(trx)),
          close: () => db.destroy(),
        };
      },
    },
  },
];

function pgPool() {
  return new Pool({ connectionString: testPostgresUrl() });
}

function mysqlCallbackPool() {
  return createMysqlCallbackPool({ uri: testMysqlUrl() });
}

const stored = (text: string): StoredResponse => ({ meta: 'm', body: Buffer.from(text) });
const claim = (token: string) => ({ token, fingerprint: 'fp', leaseMs: 60_000 });
const newKey = () => `idempotency:{${randomUUID()}}`;

describe.each(databases)('$name store: completeInTransaction', (database) => {
  let store: TransactionalIdempotencyStore & { close(): Promise<void> };
  beforeAll(() => {
    store = database.store();
  });
  afterAll(() => store.close());

  describe.each(Object.entries(database.orms))('with a %s transaction', (name, open) => {
    let orm: Orm;
    beforeAll(() => {
      orm = open();
    });
    afterAll(() => orm.close());

    it('commits the completion with the transaction, fenced inside it too', async () => {
      const key = newKey();
      await store.claim(key, claim('a'));
      await orm.transaction(async (tx) => {
        expect(await store.completeInTransaction(tx, key, 'a', stored('done'), 60_000)).toBe(true);
        expect(await store.completeInTransaction(tx, key, 'a', stored('again'), 60_000)).toBe(
          false,
        );
      });
      const replay = await store.claim(key, claim('b'));
      expect(replay.status === 'completed' && replay.response.body.toString()).toBe('done');
    });

    it('rolls the completion back with the transaction', async () => {
      const key = newKey();
      await store.claim(key, claim('a'));
      const failure = new Error('the handler failed after the completion was written');
      await expect(
        orm.transaction(async (tx) => {
          expect(await store.completeInTransaction(tx, key, 'a', stored('x'), 60_000)).toBe(true);
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect((await store.claim(key, claim('b'))).status).toBe('in_progress');
      expect(await store.complete(key, 'a', stored('later'), 60_000)).toBe(true);
    });

    if (!REFUSED_OUTSIDE.includes(name)) return;
    it('refuses the database outside a transaction, where it would commit alone', async () => {
      const key = newKey();
      await store.claim(key, claim('a'));
      await expect(
        store.completeInTransaction(orm.outside, key, 'a', stored('x'), 60_000),
      ).rejects.toThrow(/not a transaction/);
      expect((await store.claim(key, claim('b'))).status).toBe('in_progress');
    });
  });
});
