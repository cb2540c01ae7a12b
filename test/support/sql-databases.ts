import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool as PgPool } from 'pg';
import {
  type IdempotencyModuleOptions,
  MysqlIdempotencyStore,
  type MysqlIdempotencyStoreOptions,
  PostgresIdempotencyStore,
  type PostgresIdempotencyStoreOptions,
} from '../../lib';
import { dropMysqlTable, testMysqlPool, uniqueMysqlTable } from './mysql';
import { dropTable, testPool, uniqueTable } from './postgres';

/** A SQL store's options, as both take them. */
export type SqlStoreOptions = PostgresIdempotencyStoreOptions & MysqlIdempotencyStoreOptions;

/** A SQL store the suite made, with what a listing test needs of it. */
export type SqlStore = PostgresIdempotencyStore | MysqlIdempotencyStore;

/**
 * PostgreSQL or MariaDB for the SQL stores' suites: one pool of the suite's own, tables of its
 * own (dropped at the end), raw statements for what a test sets up or looks at.
 */
export interface SqlDatabase {
  name: 'PostgreSQL' | 'MariaDB';
  /** The folder of its migrations in sql/. */
  folder: 'postgres' | 'mysql';
  open(): Promise<void>;
  close(): Promise<void>;
  /** A table name of the suite's own, dropped (with its steps table) by close(). */
  table(name: string): string;
  store(table: string, options?: SqlStoreOptions): SqlStore;
  /** The module options of a store on this database's pool. */
  option(table: string, ensureSchema?: boolean): IdempotencyModuleOptions;
  /** Runs `sql` (placeholders `$n` on PostgreSQL, `?` on MariaDB); resolves its rows. */
  query<T = Record<string, unknown>>(sql: string, values?: unknown[]): Promise<T[]>;
  /** `name` quoted as an identifier. */
  quote(name: string): string;
  /** The SQL for a time `seconds` from now (negative: ago) on the database's clock. */
  inSeconds(seconds: number): string;
}

/** PostgreSQL and MariaDB, for `describe.each`. */
export function sqlDatabases(): SqlDatabase[] {
  let pg: PgPool;
  let my: MysqlPool;
  const pgTables: string[] = [];
  const myTables: string[] = [];
  return [
    {
      name: 'PostgreSQL',
      folder: 'postgres',
      open: async () => void (pg = await testPool({ max: 10 })),
      close: async () => {
        for (const table of pgTables) await dropTable(pg, table);
        await pg.end();
      },
      table: (name) => {
        const table = uniqueTable(name);
        pgTables.push(table);
        return table;
      },
      store: (table, options = {}) =>
        new PostgresIdempotencyStore(pg, {
          table,
          ensureSchema: true,
          sweepIntervalMs: 0,
          ...options,
        }),
      option: (table, ensureSchema = true) => ({ postgres: { pool: pg, table, ensureSchema } }),
      query: async <T>(sql: string, values: unknown[] = []) =>
        (await pg.query(sql, values)).rows as T[],
      quote: (name) => `"${name}"`,
      inSeconds: (seconds) => `statement_timestamp() + interval '${seconds} seconds'`,
    },
    {
      name: 'MariaDB',
      folder: 'mysql',
      open: async () => void (my = await testMysqlPool({ connectionLimit: 10 })),
      close: async () => {
        for (const table of myTables) await dropMysqlTable(my, table);
        await my.end();
      },
      table: (name) => {
        const table = uniqueMysqlTable(name);
        myTables.push(table);
        return table;
      },
      store: (table, options = {}) =>
        new MysqlIdempotencyStore(my, {
          table,
          ensureSchema: true,
          sweepIntervalMs: 0,
          ...options,
        }),
      option: (table, ensureSchema = true) => ({ mysql: { pool: my, table, ensureSchema } }),
      query: async <T>(sql: string, values: unknown[] = []) => {
        const [rows] = await my.query(sql, values);
        return rows as T[];
      },
      quote: (name) => `\`${name}\``,
      inSeconds: (seconds) => `UTC_TIMESTAMP(6) + INTERVAL ${seconds} SECOND`,
    },
  ];
}
