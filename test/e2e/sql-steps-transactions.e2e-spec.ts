import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import knex from 'knex';
import { Kysely, MysqlDialect, PostgresDialect } from 'kysely';
import { createPool as createMysqlCallbackPool } from 'mysql2';
import { createPool as createMysqlPool, type Pool as MysqlPool } from 'mysql2/promise';
import { randomUUID } from 'node:crypto';
import { Pool, type Pool as PgPool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  MysqlIdempotencyStore,
  PostgresIdempotencyStore,
  type TransactionalIdempotencyStore,
} from '../../lib';
import { queryInTransaction } from '../../lib/stores/sql/transaction';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { step, stepsOf } from '../support/step-cases';

/**
 * A step of a resumable run with `transactional`: its marker (recordStepInTransaction) and the
 * step's own writes commit together, through the handle the app's TransactionHost exposes,
 * whatever the ORM, and roll back together; a run that lost its lease records nothing, and its
 * writes roll back. And the fencing holds against a takeover that races a step in flight: the
 * new owner resumes after the step that committed while it waited.
 */

/** An ORM on one database: a transaction run its own way, handing over its `tx`. */
interface Orm {
  transaction(fn: (tx: unknown) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

interface Database {
  name: string;
  store: () => TransactionalIdempotencyStore & { close(): Promise<void> };
  /** The app's own table (`k` text) and a count of its rows with `k`. */
  appTable: string;
  createAppTable(): Promise<void>;
  appRows(k: string): Promise<number>;
  /** `INSERT INTO app (k) VALUES (<k>)`, in this database's placeholders. */
  insert: string;
  placeholders: '$n' | '?';
  /** A transaction of the driver itself, held open until `end`. */
  begin(): Promise<{ tx: unknown; end(commit: boolean): Promise<void> }>;
  /** Resolves once a statement that touches `table` waits for a row lock. */
  lockWaitOn(table: string): Promise<void>;
  orms: Record<string, () => Orm>;
}

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

/** Polls `check` (every `everyMs`, at most 10 s) until it holds: a state of the server, observed. */
async function until(what: string, check: () => Promise<boolean>, everyMs = 20): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

function kysely(db: Kysely<unknown>): Orm {
  return { transaction: (fn) => db.transaction().execute(fn), close: () => db.destroy() };
}

const pgApp = uniqueTable('steps_app');
const myApp = uniqueMysqlTable('steps_app');

const databases: Database[] = [
  {
    name: 'PostgreSQL',
    store: () => {
      const table = uniqueTable('steps_tx');
      cleanups.push(() => dropTable(pg, table));
      return new PostgresIdempotencyStore(pg, { table, ensureSchema: true, sweepIntervalMs: 0 });
    },
    appTable: pgApp,
    createAppTable: async () => {
      await pg.query(`CREATE TABLE "${pgApp}" (k text NOT NULL)`);
      cleanups.push(() => dropTable(pg, pgApp));
    },
    appRows: async (k) =>
      (await pg.query(`SELECT count(*)::int AS n FROM "${pgApp}" WHERE k = $1`, [k])).rows[0].n,
    insert: `INSERT INTO "${pgApp}" (k) VALUES ($1)`,
    placeholders: '$n',
    begin: async () => {
      const client = await pg.connect();
      await client.query('BEGIN');
      return {
        tx: client,
        end: async (commit) => {
          await client.query(commit ? 'COMMIT' : 'ROLLBACK');
          client.release();
        },
      };
    },
    lockWaitOn: (table) =>
      until('the claim waits for the row lock', async () => {
        const { rows } = await pg.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
          [table],
        );
        return rows[0].n > 0;
      }),
    orms: {
      TypeORM: () => {
        const ready = new DataSource({ type: 'postgres', url: testPostgresUrl() }).initialize();
        return {
          transaction: async (fn) =>
            (await ready).transaction((manager: EntityManager) => fn(manager)),
          close: async () => (await ready).destroy(),
        };
      },
      Knex: () => {
        const db = knex({ client: 'pg', connection: testPostgresUrl() });
        return { transaction: (fn) => db.transaction((trx) => fn(trx)), close: () => db.destroy() };
      },
      Kysely: () =>
        kysely(
          new Kysely({
            dialect: new PostgresDialect({
              pool: new Pool({ connectionString: testPostgresUrl() }),
            }),
          }),
        ),
      Drizzle: () => {
        const db = drizzlePg({ connection: testPostgresUrl() });
        return { transaction: (fn) => db.transaction(fn), close: () => db.$client.end() };
      },
    },
  },
  {
    name: 'MariaDB',
    store: () => {
      const table = uniqueMysqlTable('steps_tx');
      cleanups.push(() => dropMysqlTable(my, table));
      return new MysqlIdempotencyStore(my, { table, ensureSchema: true, sweepIntervalMs: 0 });
    },
    appTable: myApp,
    createAppTable: async () => {
      await my.query(`CREATE TABLE \`${myApp}\` (k VARCHAR(100) NOT NULL) ENGINE=InnoDB`);
      cleanups.push(() => dropMysqlTable(my, myApp));
    },
    appRows: async (k) => {
      const [rows] = await my.query(`SELECT COUNT(*) AS n FROM \`${myApp}\` WHERE k = ?`, [k]);
      return Number((rows as { n: number }[])[0].n);
    },
    insert: `INSERT INTO \`${myApp}\` (k) VALUES (?)`,
    placeholders: '?',
    begin: async () => {
      const connection = await my.getConnection();
      // READ COMMITTED, where an INSERT ... SELECT reads without locking unless told to: the
      // case recordStep's locking read is for (REPEATABLE READ locks the rows it reads anyway).
      await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await connection.beginTransaction();
      return {
        tx: connection,
        end: async (commit) => {
          await (commit ? connection.commit() : connection.rollback());
          connection.release();
        },
      };
    },
    lockWaitOn: (table) =>
      until(
        'the claim waits for the row lock',
        async () => {
          const [rows] = await my.query(
            `SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX
             WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE CONCAT('%', ?, '%')`,
            [table],
          );
          return Number((rows as { n: number }[])[0].n) > 0;
        },
        // InnoDB refreshes INNODB_TRX only when nobody read it for 100 ms: a faster poll would
        // read the same stale rows forever.
        150,
      ),
    orms: {
      TypeORM: () => {
        const ready = new DataSource({ type: 'mariadb', url: testMysqlUrl() }).initialize();
        return {
          transaction: async (fn) =>
            (await ready).transaction((manager: EntityManager) => fn(manager)),
          close: async () => (await ready).destroy(),
        };
      },
      Knex: () => {
        const db = knex({ client: 'mysql2', connection: testMysqlUrl() });
        return { transaction: (fn) => db.transaction((trx) => fn(trx)), close: () => db.destroy() };
      },
      Kysely: () =>
        kysely(
          new Kysely({
            dialect: new MysqlDialect({ pool: createMysqlCallbackPool({ uri: testMysqlUrl() }) }),
          }),
        ),
      Drizzle: () => {
        const pool = createMysqlPool({ uri: testMysqlUrl() });
        const db = drizzleMysql({ client: pool });
        return { transaction: (fn) => db.transaction(fn), close: () => pool.end() };
      },
    },
  },
];

const key = () => `steps:{${randomUUID()}}`;
const claim = (token: string, leaseMs = 60_000) => ({
  token,
  fingerprint: 'fp',
  leaseMs,
  resumable: true,
});
const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe.each(databases)('$name store: steps in the app’s transaction', (database) => {
  let store: TransactionalIdempotencyStore & { close(): Promise<void> };
  /** The app's write, through the same handle as the step. */
  const write = (tx: unknown, k: string) =>
    queryInTransaction(tx, database.insert, [k], database.placeholders);

  beforeAll(async () => {
    store = database.store();
    await store.whenReady!(10_000);
    await database.createAppTable();
  });
  afterAll(() => store.close());

  describe.each(Object.entries(database.orms))('with a %s transaction', (_name, open) => {
    let orm: Orm;
    beforeAll(() => {
      orm = open();
    });
    afterAll(() => orm.close());

    it('commits the step with the step’s own writes', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      await orm.transaction(async (tx) => {
        await write(tx, k);
        expect(await store.recordStepInTransaction!(tx, k, 'a', step(0, 'order'), 60_000)).toBe(
          true,
        );
      });
      expect(await database.appRows(k)).toBe(1);
      await store.release(k, 'a');
      expect(stepsOf(await store.claim(k, claim('b')))).toEqual([
        { index: 0, name: 'order', body: 'order' },
      ]);
    });

    it('rolls the step back with the step’s own writes', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      const failure = new Error('the step failed after its marker was written');
      await expect(
        orm.transaction(async (tx) => {
          await write(tx, k);
          expect(await store.recordStepInTransaction!(tx, k, 'a', step(0, 'order'), 60_000)).toBe(
            true,
          );
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect(await database.appRows(k)).toBe(0);
      await store.release(k, 'a');
      expect(await store.claim(k, claim('b'))).toEqual({ status: 'claimed' });
    });

    it('refuses the step of a run whose record another owner took over', async () => {
      const k = key();
      await store.claim(k, claim('zombie', 200));
      await wait(350);
      await store.claim(k, claim('heir'));
      let recorded: boolean | undefined;
      await expect(
        orm.transaction(async (tx) => {
          await write(tx, k);
          recorded = await store.recordStepInTransaction!(tx, k, 'zombie', step(0, 'x'), 60_000);
          // What the core does with a refused marker: the step throws, its writes roll back.
          if (!recorded) throw new Error('fenced');
        }),
      ).rejects.toThrow('fenced');
      expect(recorded).toBe(false);
      expect(await database.appRows(k)).toBe(0);
    });

    it('clears the steps with a completion in the transaction, and keeps them on rollback', async () => {
      const k = key();
      await store.claim(k, claim('a'));
      await store.recordStep!(k, 'a', step(0, 'order'), 60_000);
      const clear = { clearSteps: true };
      await expect(
        orm.transaction(async (tx) => {
          expect(
            await store.completeInTransaction(tx, k, 'a', step(9, 'r').result, 300, clear),
          ).toBe(true);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await store.inspect(k)).toMatchObject({ steps: [{ index: 0, name: 'order' }] });
      await orm.transaction(async (tx) => {
        expect(await store.completeInTransaction(tx, k, 'a', step(9, 'r').result, 300, clear)).toBe(
          true,
        );
      });
      await wait(450);
      expect(await store.claim(k, claim('b'))).toEqual({ status: 'claimed' });
    });
  });

  it('refuses a handle outside a transaction, naming recordStepInTransaction', async () => {
    const k = key();
    await store.claim(k, claim('a'));
    const pool = database.name === 'PostgreSQL' ? pg : my;
    await expect(
      store.recordStepInTransaction!(pool, k, 'a', step(0, 'x'), 60_000),
    ).rejects.toThrow(
      /^recordStepInTransaction: tx is not inside a transaction.*the step would commit on its own/,
    );
  });

  it('resumes a takeover after a step that committed while the takeover waited for it', async () => {
    const k = key();
    await store.claim(k, claim('zombie', 200));
    // The zombie's step in flight: its marker written, its transaction not yet committed.
    const zombie = await database.begin();
    expect(
      await store.recordStepInTransaction!(zombie.tx, k, 'zombie', step(0, 'order'), 60_000),
    ).toBe(true);
    await wait(350); // the zombie's lease runs out
    const takeover = store.claim(k, claim('heir'));
    await database.lockWaitOn((store as unknown as { table: string }).table);
    await zombie.end(true);
    // The step committed: the heir must not run it again.
    expect(stepsOf(await takeover)).toEqual([{ index: 0, name: 'order', body: 'order' }]);
    expect(await store.recordStep!(k, 'zombie', step(1, 'charge'), 60_000)).toBe(false);
  });

  it('runs a step again when the zombie’s transaction that held it rolled back', async () => {
    const k = key();
    await store.claim(k, claim('zombie', 200));
    const zombie = await database.begin();
    await store.recordStepInTransaction!(zombie.tx, k, 'zombie', step(0, 'order'), 60_000);
    await wait(350);
    const takeover = store.claim(k, claim('heir'));
    await database.lockWaitOn((store as unknown as { table: string }).table);
    await zombie.end(false);
    expect(await takeover).toEqual({ status: 'claimed' });
  });
});
