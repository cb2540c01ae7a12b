import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions, IdempotencyService } from '../../lib';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';

/**
 * Step names are any text of 1 to 200 characters (docs/steps.md), and handlers build them from
 * data (`step(\`ship ${item.sku}\`)`). Whatever the name holds, a step must either be refused
 * before its function runs, or resume: recorded once, returned on the retry without running
 * again. What must not happen is a step whose effect happened and whose record the store cannot
 * keep or give back as it was: every retry then runs the effect again (503), or fails forever
 * with a step mismatch.
 */
const NAMES: [string, string][] = [
  ['a NUL', 'ship\0box'],
  ['a lone surrogate', 'ship \ud800'],
  ['control characters', 'ship\x01\x1b[31m\x7f'],
  ['an emoji', 'ship 📦'],
  ['200 three-byte characters', '€'.repeat(200)],
  ['a prototype key', '__proto__'],
];

const redisPrefix = uniquePrefix('step-names');
const pgTable = uniqueTable('step_names');
const mysqlTable = uniqueMysqlTable('step_names');

const STORES: [string, () => IdempotencyModuleOptions][] = [
  ['memory', () => ({})],
  ['Redis', () => ({ redis: testRedisUrl(), keyPrefix: redisPrefix })],
  [
    'PostgreSQL',
    () => ({
      postgres: { connectionString: testPostgresUrl(), table: pgTable, ensureSchema: true },
    }),
  ],
  [
    'MariaDB',
    () => ({ mysql: { connectionString: testMysqlUrl(), table: mysqlTable, ensureSchema: true } }),
  ],
];

afterAll(async () => {
  await cleanUpPrefix(redisPrefix);
  const pg = await testPool();
  await dropTable(pg, pgTable);
  await pg.end();
  const mysql = await testMysqlPool();
  await dropMysqlTable(mysql, mysqlTable);
  await mysql.end();
});

describe.each(STORES)('step names on the %s store', (_store, options) => {
  let app: INestApplicationContext;
  let service: IdempotencyService;

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot(options())] })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    await app.init();
    service = app.get(IdempotencyService);
  });
  afterAll(() => app?.close());

  it.each(NAMES)('a name with %s is refused before the step runs, or resumes', async (_, name) => {
    const key = randomUUID();
    let runs = 0;
    let failAfterStep = true;
    const fn = async () => {
      const shipped = await service.step(name, () => ++runs);
      if (failAfterStep) {
        failAfterStep = false;
        throw new Error('after the step');
      }
      return shipped;
    };
    const first = await service.run(key, fn, { resumable: true }).catch((error: Error) => error);
    let outcome: string;
    if (runs === 0) {
      outcome = first instanceof TypeError ? 'refused before the step ran' : `${first}`;
    } else {
      // The step ran: the retry must take its record and not run it again.
      const retry = await service.run(key, fn, { resumable: true }).catch((e: Error) => e);
      outcome =
        retry === 1 && runs === 1
          ? 'resumed: the step ran once'
          : `the step ran ${runs} times; the first run got "${first}", the retry "${retry}"`;
    }
    expect(['refused before the step ran', 'resumed: the step ran once']).toContain(outcome);
  });
});
