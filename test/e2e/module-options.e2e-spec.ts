import { Controller, DynamicModule, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  MemoryIdempotencyStore,
} from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import {
  deleteKeysUnder,
  inspectionClient,
  recordKeysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { PLATFORMS, Platform, post } from '../support/test-app';

/**
 * What `forRoot()` and `forRootAsync()` accept: durations as strings, the defaults without an
 * argument, a factory's result checked, and no process-local store in production unless asked.
 */

let runs = 0;

@Controller('things')
class ThingsController {
  @Post()
  @Idempotent()
  create() {
    return { run: ++runs };
  }

  @Post('hour')
  @Idempotent({ ttl: '1h', lockTtl: '2m' })
  hour() {
    return { run: ++runs };
  }
}

async function boot(idempotency: DynamicModule, platform: Platform = 'express') {
  @Module({ imports: [idempotency], controllers: [ThingsController] })
  class AppModule {}
  const app =
    platform === 'fastify'
      ? await NestFactory.create(AppModule, new FastifyAdapter(), {
          logger: false,
          abortOnError: false,
        })
      : await NestFactory.create(AppModule, { logger: false, abortOnError: false });
  await app.listen(0, '127.0.0.1');
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
}

async function replays(url: string, path = '/things'): Promise<void> {
  const key = randomUUID();
  const first = await post(url, path, { key });
  const replay = await post(url, path, { key });
  expect(first.status).toBe(201);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.text).toBe(first.text);
}

describe.each(PLATFORMS)('module options on %s', (platform) => {
  describe('durations as strings', () => {
    it('takes ttl and lockTtl as strings and stores the Redis record for that long', async () => {
      const prefix = uniquePrefix('durations');
      const { app, url } = await boot(
        IdempotencyModule.forRoot({
          redis: testRedisUrl(),
          keyPrefix: prefix,
          ttl: '90s',
          lockTtl: '30s',
          storeTimeout: '2s',
          waitTimeout: '500ms',
        }),
        platform,
      );
      const redis = inspectionClient();
      try {
        await replays(url);
        await replays(url, '/things/hour');
        const ttls = new Map<string, number>();
        for (const key of await recordKeysUnder(redis, prefix)) {
          ttls.set(key, await redis.pttl(key));
        }
        const sorted = [...ttls.values()].sort((a, b) => a - b);
        expect(sorted).toHaveLength(2);
        // The module's '90s', and the route's '1h'.
        expect(sorted[0]).toBeGreaterThan(80_000);
        expect(sorted[0]).toBeLessThanOrEqual(90_000);
        expect(sorted[1]).toBeGreaterThan(3_500_000);
        expect(sorted[1]).toBeLessThanOrEqual(3_600_000);
      } finally {
        await app.close();
        await deleteKeysUnder(redis, prefix);
        await redis.quit();
      }
    });

    it('takes ttl as a string on PostgreSQL', async () => {
      const pool = await testPool();
      const table = uniqueTable('durations');
      const { app, url } = await boot(
        IdempotencyModule.forRoot({
          postgres: { connectionString: testPostgresUrl(), table, ensureSchema: true },
          ttl: '1d',
        }),
        platform,
      );
      try {
        await replays(url);
        const { rows } = await pool.query<{ seconds: number }>(
          `SELECT EXTRACT(EPOCH FROM (expires_at - now()))::float8 AS seconds FROM "${table}"`,
        );
        expect(rows).toHaveLength(1);
        expect(rows[0].seconds).toBeGreaterThan(86_400 - 60);
        expect(rows[0].seconds).toBeLessThanOrEqual(86_400);
      } finally {
        await app.close();
        await dropTable(pool, table);
        await pool.end();
      }
    });

    it.each([
      [{ ttl: '2 days' }, `ttl must be milliseconds or a duration string`],
      [{ lockTtl: 'soon' }, `lockTtl must be milliseconds or a duration string`],
      [{ storeTimeout: '' }, `storeTimeout must be milliseconds or a duration string`],
      [{ waitTimeout: '-1s' }, `waitTimeout must be milliseconds or a duration string`],
      [{ lockTtl: '30d' }, 'lockTtl must be at most 2147483647 ms'],
    ])('refuses %j at boot, naming the option', async (options, message) => {
      await expect(
        boot(IdempotencyModule.forRoot(options as IdempotencyModuleOptions), platform),
      ).rejects.toThrow(`IdempotencyModule: ${message}`);
    });
  });

  describe('forRoot() and forRootAsync()', () => {
    it('boots forRoot() without an argument with the defaults', async () => {
      const { app, url } = await boot(IdempotencyModule.forRoot(), platform);
      try {
        await replays(url);
      } finally {
        await app.close();
      }
    });

    it.each([[undefined], [null], ['redis://127.0.0.1:6379'], [42], [[]]])(
      'refuses a forRootAsync factory returning %j, naming forRootAsync',
      async (returned) => {
        const module = IdempotencyModule.forRootAsync({
          useFactory: () => returned as unknown as IdempotencyModuleOptions,
        });
        await expect(boot(module, platform)).rejects.toThrow(
          /IdempotencyModule\.forRootAsync: the options factory returned .*; it must return an options object/,
        );
      },
    );

    it('takes durations as strings from a forRootAsync factory', async () => {
      const module = IdempotencyModule.forRootAsync({
        useFactory: async () => ({ ttl: '24h', lockTtl: '30s' }),
      });
      const { app, url } = await boot(module, platform);
      try {
        await replays(url);
      } finally {
        await app.close();
      }
    });
  });

  describe('in production (NODE_ENV=production)', () => {
    const nodeEnv = process.env.NODE_ENV;
    beforeEach(() => (process.env.NODE_ENV = 'production'));
    afterEach(() => (process.env.NODE_ENV = nodeEnv));

    it.each([
      ['forRoot', () => IdempotencyModule.forRoot({})],
      ['forRoot()', () => IdempotencyModule.forRoot()],
      ['forRootAsync', () => IdempotencyModule.forRootAsync({ useFactory: () => ({}) })],
    ])('refuses to boot %s without a store, naming the options', async (_, make) => {
      await expect(boot(make(), platform)).rejects.toThrow(
        'IdempotencyModule: NODE_ENV is production and no `redis`, `postgres`, `mysql` or `store` is ' +
          'configured',
      );
      await expect(boot(make(), platform)).rejects.toThrow('allowInMemoryStorage: true');
    });

    it.each([
      ['allowInMemoryStorage: true', () => ({ allowInMemoryStorage: true })],
      ['a store', () => ({ store: new MemoryIdempotencyStore() })],
      ['redis', () => ({ redis: testRedisUrl(), keyPrefix: uniquePrefix('production') })],
    ])('boots with %s', async (_, options: () => IdempotencyModuleOptions) => {
      const { app, url } = await boot(IdempotencyModule.forRoot(options()), platform);
      try {
        await replays(url);
      } finally {
        await app.close();
      }
    });
  });
});
