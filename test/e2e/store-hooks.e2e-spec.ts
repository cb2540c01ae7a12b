import { Controller, Get, LoggerService, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import {
  IdempotencyModule,
  MemoryIdempotencyStore,
  type IdempotencyModuleOptions,
  type IdempotencyStore,
} from '../../lib';
import { IdempotencyHealthIndicator } from '../../lib/terminus';

/**
 * A store of your own takes part in boot and health checks through the store contract's optional
 * hooks, as the built-in stores do (Redis: its eviction policy): its boot warnings are logged,
 * its health details reach the Terminus result, and a store without the hooks (or whose hooks
 * fail or hang) boots and reports up all the same.
 */

/** Collects what the app logs at warn level. */
class Captured implements LoggerService {
  readonly warnings: string[] = [];
  log = () => {};
  error = () => {};
  warn = (message: unknown) => void this.warnings.push(String(message));
}

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.idempotency.pingCheck('idempotency', { timeout: 500 })]);
  }
}

async function start(options: IdempotencyModuleOptions) {
  const logger = new Captured();
  @Module({
    imports: [IdempotencyModule.forRoot(options), TerminusModule.forRoot({ logger: false })],
    controllers: [HealthController],
    providers: [IdempotencyHealthIndicator],
  })
  class AppModule {}
  const startedAt = performance.now();
  const app = await NestFactory.create(AppModule, { logger });
  await app.listen(0, '127.0.0.1');
  const bootMs = performance.now() - startedAt;
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const health = async () => (await (await fetch(`${url}/health`)).json()) as unknown;
  return { app, logger, bootMs, health };
}

/** A memory store that says things about its backend. */
class ChattyStore extends MemoryIdempotencyStore {
  override readonly displayName = 'Acme';
  override async bootWarnings(): Promise<string[]> {
    return ['Acme: replication is asynchronous on this cluster'];
  }
  override async healthDetails(): Promise<Record<string, unknown>> {
    return { replicas: 2 };
  }
}

const UP = { status: 'ok', info: { idempotency: { status: 'up' } } };

it("logs a store's boot warnings and reports its health details", async () => {
  const t = await start({ store: new ChattyStore() });
  try {
    expect(t.logger.warnings).toEqual(['Acme: replication is asynchronous on this cluster']);
    expect(await t.health()).toEqual(
      expect.objectContaining({
        status: 'ok',
        info: { idempotency: { status: 'up', replicas: 2 } },
      }),
    );
  } finally {
    await t.app.close();
  }
});

it('boots and reports up when the hooks fail, or hang past storeTimeout', async () => {
  class Failing extends MemoryIdempotencyStore {
    override bootWarnings(): Promise<string[]> {
      return Promise.reject(new Error('no'));
    }
    override healthDetails(): Promise<Record<string, unknown>> {
      throw new Error('no');
    }
  }
  class Hanging extends MemoryIdempotencyStore {
    override bootWarnings(): Promise<string[]> {
      return new Promise(() => {});
    }
  }
  for (const store of [new Failing(), new Hanging()]) {
    const t = await start({ store, storeTimeout: 200 });
    try {
      expect(t.logger.warnings).toEqual([]);
      expect(t.bootMs).toBeLessThan(2_000);
      expect(await t.health()).toEqual(expect.objectContaining(UP));
    } finally {
      await t.app.close();
    }
  }
});

it('boots and reports up with a store that has no hooks at all (a plain object)', async () => {
  const memory = new MemoryIdempotencyStore();
  const plain = {
    claim: memory.claim.bind(memory),
    complete: memory.complete.bind(memory),
    release: memory.release.bind(memory),
    extend: memory.extend.bind(memory),
  } as unknown as IdempotencyStore;
  const t = await start({ store: plain });
  try {
    expect(t.logger.warnings).toEqual([]);
    expect(await t.health()).toEqual(expect.objectContaining(UP));
  } finally {
    await t.app.close();
    await memory.close();
  }
});
