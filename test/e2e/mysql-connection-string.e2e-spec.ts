import { Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'mysql2/promise';
import { IdempotencyModule } from '../../lib';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { post, startTestApp } from '../support/test-app';

/**
 * The MySQL store takes its URL as `connectionString`, the name the PostgreSQL store takes;
 * `uri`, its old name, still works, with one deprecation warning per process.
 */

const DEPRECATION =
  'mysql.uri is deprecated: name it connectionString, as the postgres option does. uri still ' +
  'works, and will be removed in a future major release.';

let pool: Pool;
const tables: string[] = [];
const table = () => {
  const name = uniqueMysqlTable('url');
  tables.push(name);
  return name;
};
let warn: jest.SpyInstance;
const warnings = () => warn.mock.calls.map(([message]) => String(message));

beforeAll(async () => {
  pool = await testMysqlPool();
});
afterAll(async () => {
  for (const name of tables) await dropMysqlTable(pool, name);
  await pool.end();
});
beforeEach(() => {
  warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => {});
});
afterEach(() => warn.mockRestore());

/** Boots an app on `mysql`, sends one key twice, and says whether the second was a replay. */
async function replays(mysql: object): Promise<boolean> {
  const app = await startTestApp('express', {
    mysql: { ...mysql, table: table(), ensureSchema: true },
    scope: 'public',
  });
  try {
    const key = randomUUID();
    expect((await post(app.url, '/payments', { key, body: { a: 1 } })).status).toBe(201);
    const again = await post(app.url, '/payments', { key, body: { a: 1 } });
    return again.headers.get('idempotent-replayed') === 'true';
  } finally {
    await app.close();
  }
}

it('boots on connectionString and replays, without a warning', async () => {
  expect(await replays({ connectionString: testMysqlUrl() })).toBe(true);
  expect(warnings()).toEqual([]);
});

it('still boots on uri, warning once per process that it is now connectionString', async () => {
  expect(await replays({ uri: testMysqlUrl() })).toBe(true);
  expect(await replays({ uri: testMysqlUrl() })).toBe(true);
  expect(warnings()).toEqual([DEPRECATION]);
});

it('refuses connectionString and uri together at boot', async () => {
  const url = testMysqlUrl();
  @Module({ imports: [IdempotencyModule.forRoot({ mysql: { connectionString: url, uri: url } })] })
  class AppModule {}
  await expect(
    NestFactory.create(AppModule, { logger: false, abortOnError: false }),
  ).rejects.toThrow(
    'IdempotencyModule: mysql takes connectionString or uri (its old name), not both',
  );
});
