import { Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool as PgPool } from 'pg';
import type { IdempotencyModuleOptions } from '../../lib';
import { testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { PLATFORMS, post, startTestApp } from '../support/test-app';

/**
 * Issue 29 item 3: a missing table (or its schema) is a missing migration, not an outage. At boot
 * the SQL stores say which is missing and what to apply (the package's migration, or
 * `ensureSchema`), never "not reachable"; with ensureSchema a schema-qualified table gets its
 * schema (PostgreSQL) or database (MySQL) created.
 */
interface Database {
  name: string;
  migration: string;
  schemaWord: string;
  option: (table: string, ensureSchema: boolean) => IdempotencyModuleOptions;
  /** Whether the table exists. */
  exists: (table: string) => Promise<boolean>;
  /** Drops a schema (database) the test created, with its tables. */
  dropSchema: (schema: string) => Promise<void>;
  end: () => Promise<void>;
}

let pg: PgPool;
let my: MysqlPool;

const databases: Database[] = [
  {
    name: 'PostgreSQL',
    migration: 'sql/postgres/001_idempotency_records.sql',
    schemaWord: 'schema',
    option: (table, ensureSchema) => ({
      postgres: { connectionString: testPostgresUrl(), table, ensureSchema },
    }),
    exists: async (table) =>
      (await pg.query('SELECT to_regclass($1) IS NOT NULL AS ok', [table])).rows[0].ok as boolean,
    dropSchema: async (schema) =>
      void (await pg.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)),
    end: () => pg.end(),
  },
  {
    name: 'MySQL',
    migration: 'sql/mysql/001_idempotency_records.sql',
    schemaWord: 'database',
    option: (table, ensureSchema) => ({ mysql: { uri: testMysqlUrl(), table, ensureSchema } }),
    exists: async (table) => {
      const [schema, name] = table.includes('.') ? table.split('.') : [null, table];
      const [rows] = await my.query(
        `SELECT COUNT(*) AS n FROM information_schema.tables
         WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
        [schema, name],
      );
      return Number((rows as { n: number }[])[0].n) === 1;
    },
    dropSchema: async (schema) => void (await my.query(`DROP DATABASE IF EXISTS \`${schema}\``)),
    end: () => my.end(),
  },
];

beforeAll(async () => {
  pg = await testPool();
  my = await testMysqlPool();
});
afterAll(async () => {
  for (const database of databases) await database.end();
});

describe.each(databases)('$name store: a missing table at boot', (database) => {
  const logged: string[] = [];
  let error: jest.SpyInstance;
  let warn: jest.SpyInstance;

  beforeEach(() => {
    logged.length = 0;
    const capture = (message: unknown) => void logged.push(String(message));
    error = jest.spyOn(Logger.prototype, 'error').mockImplementation(capture);
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(capture);
  });
  afterEach(() => {
    error.mockRestore();
    warn.mockRestore();
  });

  it.each(PLATFORMS)(
    'says the table is missing and names the migration and ensureSchema (%s)',
    async (platform) => {
      const table = database.name === 'MySQL' ? uniqueMysqlTable('absent') : uniqueTable('absent');
      const app = await startTestApp(platform, {
        ...database.option(table, false),
        scope: 'public',
      });
      try {
        const said = logged.join('\n');
        expect(said).toContain(`the table "${table}" does not exist`);
        expect(said).toContain(database.migration);
        expect(said).toContain('ensureSchema: true');
        expect(said).not.toMatch(/not reachable/);
        const answer = await post(app.url, '/payments', { key: randomUUID(), body: { a: 1 } });
        expect(answer.status).toBe(503);
        expect(app.executions.count('create')).toBe(0);
      } finally {
        await app.close();
      }
    },
  );

  it('says the schema of a qualified table is missing', async () => {
    const schema = `idem_absent_${randomUUID().slice(0, 8)}`;
    const app = await startTestApp('express', {
      ...database.option(`${schema}.idempotency_records`, false),
      scope: 'public',
    });
    await app.close();
    expect(logged.join('\n')).toContain(
      `the ${database.schemaWord} "${schema}" of the table "${schema}.idempotency_records" does not exist`,
    );
  });

  it.each(PLATFORMS)(
    'creates the schema of a qualified table with ensureSchema (%s)',
    async (platform) => {
      const schema = `idem_created_${randomUUID().slice(0, 8)}`;
      const table = `${schema}.idempotency_records`;
      try {
        const app = await startTestApp(platform, {
          ...database.option(table, true),
          scope: 'public',
        });
        try {
          expect(await database.exists(table)).toBe(true);
          const key = randomUUID();
          const first = await post(app.url, '/payments', { key, body: { a: 1 } });
          expect(first.status).toBe(201);
          const replay = await post(app.url, '/payments', { key, body: { a: 1 } });
          expect(replay.headers.get('idempotent-replayed')).toBe('true');
          expect(app.executions.count('create')).toBe(1);
          expect(logged.join('\n')).not.toMatch(/does not exist|not reachable/);
        } finally {
          await app.close();
        }
      } finally {
        await database.dropSchema(schema);
      }
    },
  );
});
