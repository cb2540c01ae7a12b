import { Controller, Get, INestApplication, Module } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import Redis from 'ioredis';
import {
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyStore,
  MemoryIdempotencyStore,
} from '../../lib';
import { IdempotencyHealthIndicator } from '../../lib/terminus';
import { listen } from '../support/http-app';
import {
  deleteKeysUnder,
  inspectionClient,
  recordKeysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { RedisProcess, startRedisServer } from '../support/redis-server';
import { Platform, PLATFORMS } from '../support/test-app';

/** The check's own timeout in these tests, in ms. */
const TIMEOUT = 300;

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.idempotency.pingCheck('idempotency', { timeout: TIMEOUT }),
    ]);
  }
}

interface HealthApp {
  app: INestApplication;
  store: IdempotencyStore;
  /** GET /health: status code and JSON body. */
  health(): Promise<{ status: number; body: Record<string, unknown> }>;
}

async function startHealthApp(
  platform: Platform,
  options: IdempotencyModuleOptions,
): Promise<HealthApp> {
  @Module({
    imports: [IdempotencyModule.forRoot(options), TerminusModule.forRoot({ logger: false })],
    controllers: [HealthController],
    providers: [IdempotencyHealthIndicator],
  })
  class AppModule {}

  const { app, url } = await listen(platform, AppModule);
  return {
    app,
    store: app.get(IdempotencyStore),
    async health() {
      const response = await fetch(`${url}/health`);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    },
  };
}

const UP = { status: 'ok', info: { idempotency: { status: 'up' } } };

let redis: Redis;
beforeAll(() => {
  redis = inspectionClient();
});
afterAll(async () => {
  await redis.quit();
});

describe.each(PLATFORMS)('IdempotencyHealthIndicator on %s', (platform) => {
  describe('with the memory store', () => {
    let t: HealthApp;
    beforeAll(async () => {
      t = await startHealthApp(platform, { store: new MemoryIdempotencyStore() });
    });
    afterAll(() => t.app.close());

    it('reports up and leaves no record behind', async () => {
      expect(await t.health()).toEqual({ status: 200, body: expect.objectContaining(UP) });
      expect((t.store as MemoryIdempotencyStore).size).toBe(0);
    });
  });

  describe('with Redis', () => {
    const prefix = uniquePrefix(`terminus-${platform}`);
    let t: HealthApp;
    beforeAll(async () => {
      t = await startHealthApp(platform, { redis: testRedisUrl(), keyPrefix: prefix });
    });
    afterAll(async () => {
      await t.app.close();
      await deleteKeysUnder(redis, prefix);
    });

    it('reports up and leaves no record behind', async () => {
      expect(await t.health()).toEqual({ status: 200, body: expect.objectContaining(UP) });
      // No record; the listing index may keep its prune cursor (lua/listing-prune.lua).
      expect(await recordKeysUnder(redis, prefix)).toEqual([]);
    });

    it('still reports up while another check holds the health key', async () => {
      // What a concurrent check (another instance, or a release that never arrived) leaves.
      const held = `${prefix}{health}`;
      const token = 'another-check';
      await t.store.claim(held, { token, fingerprint: '', leaseMs: 10_000 });
      try {
        expect(await t.health()).toEqual({ status: 200, body: expect.objectContaining(UP) });
      } finally {
        await t.store.release(held, token);
      }
    });
  });
});

describe('IdempotencyHealthIndicator with a Redis that freezes and stops', () => {
  let server: RedisProcess;
  let t: HealthApp;
  beforeAll(async () => {
    server = await startRedisServer();
    t = await startHealthApp('express', { redis: server.url });
  });
  afterAll(async () => {
    await t?.app.close();
    await server?.stop();
  });

  it('reports down on a timeout while Redis is frozen, up once it resumes, down once it is gone', async () => {
    expect(await t.health()).toEqual({ status: 200, body: expect.objectContaining(UP) });

    process.kill(server.pid, 'SIGSTOP'); // the connection stays open; nothing answers
    let frozen;
    try {
      const started = performance.now();
      frozen = await t.health();
      expect(performance.now() - started).toBeLessThan(TIMEOUT + 1_000);
    } finally {
      process.kill(server.pid, 'SIGCONT');
    }
    expect(frozen).toEqual({
      status: 503,
      body: expect.objectContaining({
        status: 'error',
        error: { idempotency: { status: 'down', message: `timeout of ${TIMEOUT} ms exceeded` } },
      }),
    });

    // The frozen claim and release land once Redis resumes; the check answers again.
    expect(await t.health()).toEqual({ status: 200, body: expect.objectContaining(UP) });

    await server.stop();
    const stopped = await t.health();
    expect(stopped).toEqual({
      status: 503,
      body: expect.objectContaining({
        status: 'error',
        error: { idempotency: { status: 'down', message: expect.any(String) } },
      }),
    });
  });
});
