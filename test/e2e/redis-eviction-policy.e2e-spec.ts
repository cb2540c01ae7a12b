import { Controller, Get, INestApplication, LoggerService, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions } from '../../lib';
import { IdempotencyHealthIndicator } from '../../lib/terminus';
import Redis from 'ioredis';
import { RedisProcess, startRedisCluster, startRedisServer } from '../support/redis-server';
import { PLATFORMS, Platform, post } from '../support/test-app';

/**
 * Redis evicts keys under memory pressure unless `maxmemory-policy` is `noeviction`; every
 * record has a TTL, so `volatile-*` policies take them too. An evicted claim or record lets a
 * duplicate run the handler again, so boot warns, naming the policy and `noeviction`, and the
 * health indicator reports it. Each case runs on a private redis-server of its own.
 */

const WARNING =
  'Redis maxmemory-policy is allkeys-lru: under memory pressure Redis may evict in-progress ' +
  'claims and stored responses, and a retry then runs the handler again. Set it to noeviction ' +
  'on the Redis this module uses (size maxmemory with headroom).';

/** Collects what the app logs, by level. */
class Captured implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log = (message: unknown) => this.push('log', message);
  warn = (message: unknown) => this.push('warn', message);
  error = (message: unknown) => this.push('error', message);
  private push(level: string, message: unknown) {
    this.lines.push({ level, message: String(message) });
  }
  of(level: string): string[] {
    return this.lines.filter((line) => line.level === level).map((line) => line.message);
  }
}

let runs = 0;

@Controller()
class AppController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.idempotency.pingCheck('idempotency', { timeout: '2s' })]);
  }

  @Post('payments')
  @Idempotent()
  create() {
    return { run: ++runs };
  }
}

async function start(platform: Platform, redis: IdempotencyModuleOptions['redis']) {
  const logger = new Captured();
  @Module({
    imports: [IdempotencyModule.forRoot({ redis }), TerminusModule.forRoot({ logger: false })],
    controllers: [AppController],
    providers: [IdempotencyHealthIndicator],
  })
  class AppModule {}
  const app: INestApplication =
    platform === 'fastify'
      ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger })
      : await NestFactory.create(AppModule, { logger });
  await app.listen(0, '127.0.0.1');
  const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const health = async () => {
    const response = await fetch(`${base}/health`);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  return { app, base, logger, health };
}

const servers: Record<'lru' | 'noeviction' | 'noConfig', RedisProcess | undefined> = {
  lru: undefined,
  noeviction: undefined,
  noConfig: undefined,
};

beforeAll(async () => {
  [servers.lru, servers.noeviction, servers.noConfig] = await Promise.all([
    startRedisServer({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'allkeys-lru'] }),
    startRedisServer({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'noeviction'] }),
    // As managed Redis does: CONFIG renamed away (here under allkeys-lru, which goes unseen).
    startRedisServer({
      args: ['--maxmemory-policy', 'allkeys-lru', '--rename-command', 'CONFIG', ''],
    }),
  ]);
});

afterAll(async () => {
  await Promise.all(Object.values(servers).map((server) => server?.stop()));
});

describe.each(PLATFORMS)('the Redis eviction policy on %s', (platform) => {
  it('warns at boot on allkeys-lru, naming the policy and noeviction, and reports it in health', async () => {
    const t = await start(platform, servers.lru!.url);
    try {
      expect(t.logger.of('warn')).toEqual([WARNING]);
      expect(await t.health()).toEqual({
        status: 200,
        body: expect.objectContaining({
          status: 'ok',
          info: {
            idempotency: { status: 'up', evictionPolicy: 'allkeys-lru', warning: WARNING },
          },
        }),
      });
      // It is a warning: requests are served as usual.
      const key = randomUUID();
      await post(t.base, '/payments', { key });
      const replay = await post(t.base, '/payments', { key });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    } finally {
      await t.app.close();
    }
  });

  it('says nothing on noeviction', async () => {
    const t = await start(platform, servers.noeviction!.url);
    try {
      expect(t.logger.of('warn')).toEqual([]);
      expect((await t.health()).body.info).toEqual({ idempotency: { status: 'up' } });
    } finally {
      await t.app.close();
    }
  });

  it('stays quiet where CONFIG is disabled, as on managed Redis', async () => {
    const t = await start(platform, servers.noConfig!.url);
    try {
      expect(t.logger.of('warn')).toEqual([]);
      expect(t.logger.of('error')).toEqual([]);
      expect((await t.health()).body.info).toEqual({ idempotency: { status: 'up' } });
    } finally {
      await t.app.close();
    }
  });
});

describe('the Redis eviction policy on a Cluster', () => {
  it('warns when one master of a Cluster may evict', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    const [first, second] = cluster.nodes;
    const node = new Redis(second.port, second.host);
    try {
      await node.config('SET', 'maxmemory-policy', 'volatile-lru');
      const t = await start('express', { clusterNodes: [first] });
      try {
        expect(t.logger.of('warn')).toEqual([WARNING.replace('allkeys-lru', 'volatile-lru')]);
      } finally {
        await t.app.close();
      }
    } finally {
      node.disconnect();
      await cluster.stop();
    }
  });
});
