import {
  BadRequestException,
  Controller,
  Get,
  INestApplication,
  Module,
  Post,
  Query,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyEvent, IdempotencyModule, IdempotencyRecords } from '../../lib';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { PLATFORMS, post } from '../support/test-app';

/**
 * IdempotencyRecords addresses a record "the way the interceptor does (key, route, owner)". The
 * interceptor validates a key with the ROUTE's maxKeyLength; the service with the MODULE's. And
 * what it throws for bad input is not an HttpException: an operator endpoint that passes a typo
 * through answers 500, not 400.
 */
@Controller('imports')
class ImportsController {
  /** Keys here are long (a client's composite operation id). */
  @Post()
  @Idempotent({ scope: 'public', maxKeyLength: 512 })
  create() {
    return { imported: true };
  }
}

/** The operator endpoint of the tests' recipe (behind the app's auth in real life). */
@Controller('admin/idempotency')
class AdminController {
  constructor(private readonly records: IdempotencyRecords) {}

  @Get()
  inspect(@Query('key') key: string, @Query('route') route: string) {
    if (typeof key !== 'string' || typeof route !== 'string') throw new BadRequestException();
    return this.records.inspect({ key, route });
  }
}

describe.each(PLATFORMS)('IdempotencyRecords under attack on %s', (platform) => {
  describe.each(['memory', 'redis'] as const)('with the %s store', (storeName) => {
    const prefix = uniquePrefix('attack-records');
    const events: IdempotencyEvent[] = [];
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            keyPrefix: prefix,
            ...(storeName === 'redis' ? { redis: testRedisUrl() } : {}),
            onEvent: (event) => events.push(event),
          }),
        ],
        controllers: [ImportsController, AdminController],
      })
      class AppModule {}
      app =
        platform === 'fastify'
          ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })
          : await NestFactory.create(AppModule, { logger: false });
      await app.listen(0, '127.0.0.1');
      url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    });
    afterAll(async () => {
      await app?.close();
      if (storeName === 'redis') {
        const redis = inspectionClient();
        await deleteKeysUnder(redis, prefix);
        await redis.quit();
      }
    });

    it('finds and deletes a record whose key the route accepted (route maxKeyLength 512)', async () => {
      const key = `${randomUUID()}-${'k'.repeat(300)}`;
      const first = await post(url, '/imports', { key });
      expect(first.status).toBe(201);
      const route = events.find((event) => event.type === 'completed')!.route;
      const records = app.get(IdempotencyRecords);
      const found = await records.inspect({ key, route }).catch((error: Error) => error.message);
      const deleted = await records.delete({ key, route }).catch((error: Error) => error.message);
      expect({ found, deleted }).toEqual({
        found: expect.objectContaining({ state: 'completed' }),
        deleted: true,
      });
    });

    it('answers a 4xx, not 500, when an operator sends a malformed key', async () => {
      const query = new URLSearchParams({ key: 'bad\u00e9key', route: 'POST /imports' });
      const response = await fetch(`${url}/admin/idempotency?${query}`);
      expect(response.status).toBe(400);
    });
  });
});
