import type { TransactionalAdapter } from '@nestjs-cls/transactional';
import { TransactionalAdapterDrizzleOrm } from '@nestjs-cls/transactional-adapter-drizzle-orm';
import { TransactionalAdapterPrisma } from '@nestjs-cls/transactional-adapter-prisma';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import knex, { type Knex } from 'knex';
import { Kysely, PostgresDialect } from 'kysely';
import { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { prismaClient, type PrismaLike } from '../prisma-client';
import { mariadb, postgres, type TestDatabase } from './databases';

/**
 * An ORM as an app uses it with `@nestjs-cls/transactional`: the transactional matrix runs every
 * entry point through each, so a new adapter is one case.
 */
export interface OrmCase {
  /** The ORM's name, in test titles. */
  name: string;
  /** The database it writes to (the records go there too). */
  database: TestDatabase;
  /** Connects to the database at `url`; `table` (id, item) exists by then. */
  open(url: string, table: string): Promise<OpenOrm>;
}

/** A connected ORM. */
export interface OpenOrm {
  /** What the app provides under the adapter's injection token (a DataSource, a Knex...). */
  instance: unknown;
  /** The `@nestjs-cls/transactional` adapter that finds {@link instance} under `token`. */
  adapter(token: string): TransactionalAdapter<unknown, unknown, unknown>;
  /** Inserts a row for `item` through `tx` (what `txHost.tx` is); resolves its id. */
  insert(tx: unknown, item: string): Promise<number>;
  /** Closes the ORM's connections. */
  close(): Promise<void>;
}

/** A published adapter, as the harness takes it. */
const adapter = (value: object) => value as TransactionalAdapter<unknown, unknown, unknown>;

/** TypeORM's DataSource, its adapter `@nestjs-cls/transactional-adapter-typeorm`. */
export const typeOrm: OrmCase = {
  name: 'TypeORM',
  database: postgres,
  async open(url, table) {
    const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
    return {
      instance: dataSource,
      adapter: (token) => adapter(new TransactionalAdapterTypeOrm({ dataSourceToken: token })),
      insert: async (tx, item) => {
        const sql = `INSERT INTO "${table}" (item) VALUES ($1) RETURNING id`;
        const [row] = await (tx as EntityManager).query<{ id: number }[]>(sql, [item]);
        return row.id;
      },
      close: () => dataSource.destroy(),
    };
  },
};

/** Drizzle on node-postgres, its adapter `@nestjs-cls/transactional-adapter-drizzle-orm`. */
export const drizzleOrm: OrmCase = {
  name: 'Drizzle (node-postgres)',
  database: postgres,
  async open(url, table) {
    const pool = new Pool({ connectionString: url });
    const db = drizzle({ client: pool });
    const payments = pgTable(table, { id: serial('id').primaryKey(), item: text('item') });
    return {
      instance: db,
      adapter: (token) =>
        adapter(new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: token })),
      insert: async (tx, item) => {
        const drizzleTx = tx as NodePgDatabase;
        const [row] = await drizzleTx
          .insert(payments)
          .values({ item })
          .returning({ id: payments.id });
        return row.id;
      },
      close: () => pool.end(),
    };
  },
};

/**
 * `@nestjs-cls/transactional-adapter-knex`'s behaviour (`knex.transaction(trx => ...)`, `trx` as
 * `txHost.tx`): that package is not on the registry this project's machines reach, so the tests
 * carry this stand-in; the handle the library writes through is Knex's own transaction.
 */
function knexAdapter(token: string) {
  return adapter({
    connectionToken: token,
    optionsFactory: (instance: Knex) => ({
      wrapWithTransaction: (
        options: Knex.TransactionConfig | undefined,
        fn: () => Promise<unknown>,
        setTx: (tx?: Knex) => void,
      ) =>
        instance.transaction((trx) => {
          setTx(trx);
          return fn();
        }, options),
      getFallbackInstance: () => instance,
    }),
  });
}

/** Knex on pg. */
export const knexOrm: OrmCase = {
  name: 'Knex',
  database: postgres,
  async open(url, table) {
    const db = knex({ client: 'pg', connection: url });
    return {
      instance: db,
      adapter: knexAdapter,
      insert: async (tx, item) => {
        const [row] = await (tx as Knex)(table).insert({ item }).returning<{ id: number }[]>('id');
        return row.id;
      },
      close: () => db.destroy(),
    };
  },
};

/**
 * `@nestjs-cls/transactional-adapter-kysely`'s behaviour (a controlled transaction:
 * `startTransaction().execute()`, commit or rollback after the callback), for the same reason as
 * {@link knexAdapter}.
 */
function kyselyAdapter(token: string) {
  return adapter({
    connectionToken: token,
    optionsFactory: (instance: Kysely<unknown>) => ({
      wrapWithTransaction: async (
        _options: unknown,
        fn: () => Promise<unknown>,
        setTx: (tx?: Kysely<unknown>) => void,
      ) => {
        const trx = await instance.startTransaction().execute();
        try {
          setTx(trx);
          const result = await fn();
          await trx.commit().execute();
          return result;
        } catch (error) {
          await trx.rollback().execute();
          throw error;
        }
      },
      getFallbackInstance: () => instance,
    }),
  });
}

/** Kysely on pg's Pool. */
export const kyselyOrm: OrmCase = {
  name: 'Kysely',
  database: postgres,
  async open(url, table) {
    const db = new Kysely<Record<string, { id: number; item: string }>>({
      dialect: new PostgresDialect({ pool: new Pool({ connectionString: url }) }),
    });
    return {
      instance: db,
      adapter: kyselyAdapter,
      insert: async (tx, item) => {
        const row = await (tx as typeof db)
          .insertInto(table)
          .values({ item } as never)
          .returning('id')
          .executeTakeFirstOrThrow();
        return row.id;
      },
      close: () => db.destroy(),
    };
  },
};

/** Prisma 7's engine-free client on `@prisma/adapter-pg`, `@nestjs-cls/transactional-adapter-prisma`. */
export const prismaOrm: OrmCase = {
  name: 'Prisma (adapter-pg)',
  database: postgres,
  async open(url, table) {
    const prisma = prismaClient(url);
    await prisma.$connect();
    return {
      instance: prisma,
      adapter: (token) => adapter(new TransactionalAdapterPrisma({ prismaInjectionToken: token })),
      insert: async (tx, item) => {
        const sql = `INSERT INTO "${table}" (item) VALUES ($1) RETURNING id`;
        const [row] = await (tx as PrismaLike).$queryRawUnsafe<{ id: number }[]>(sql, item);
        return row.id;
      },
      close: () => prisma.$disconnect(),
    };
  },
};

/** TypeORM on MariaDB (mysql2), its adapter `@nestjs-cls/transactional-adapter-typeorm`. */
export const typeOrmMariadb: OrmCase = {
  name: 'TypeORM',
  database: mariadb,
  async open(url, table) {
    const dataSource = await new DataSource({ type: 'mysql', url }).initialize();
    return {
      instance: dataSource,
      adapter: (token) => adapter(new TransactionalAdapterTypeOrm({ dataSourceToken: token })),
      insert: async (tx, item) => {
        const sql = `INSERT INTO \`${table}\` (item) VALUES (?)`;
        const result = await (tx as EntityManager).query<{ insertId: number }>(sql, [item]);
        return result.insertId;
      },
      close: () => dataSource.destroy(),
    };
  },
};

/** Every adapter the matrix runs: five on PostgreSQL, TypeORM on MariaDB. */
export const ORMS: OrmCase[] = [typeOrm, drizzleOrm, kyselyOrm, knexOrm, prismaOrm, typeOrmMariadb];
