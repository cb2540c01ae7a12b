import {
  CallHandler,
  Controller,
  ExecutionContext,
  Headers,
  Injectable,
  Module,
  ModuleMetadata,
  NestInterceptor,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { retry } from 'rxjs';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import {
  Idempotent,
  IdempotencyInterceptor,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyStore,
  MemoryIdempotencyStore,
  RedisIdempotencyStore,
} from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';

let runs = 0;

@Controller('things')
class ThingsController {
  @Post()
  @Idempotent()
  create() {
    return { run: ++runs };
  }

  @Post('plain')
  plain() {
    return { run: ++runs };
  }
}

let attempts = 0;

/** Fails its first attempt, for an outer retry to try again. */
@Controller('flaky')
class FlakyController {
  @Post()
  @Idempotent()
  create() {
    if (++attempts === 1) throw new Error('flaky');
    return { attempt: attempts };
  }
}

/** A user's global interceptor that retries a failed handler once. */
@Injectable()
class RetryOnce implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(retry({ count: 1 }));
  }
}

/** A subclass that keeps tenants apart, bound to one method of a controller marked as a whole. */
@Injectable()
class TenantScoped extends IdempotencyInterceptor {
  protected override getScope(...args: Parameters<IdempotencyInterceptor['getScope']>) {
    const tenant = String(args[0].switchToHttp().getRequest().headers['x-tenant']);
    return `${super.getScope(...args)}\0${tenant}`;
  }
}

let tenantRuns = 0;

@Controller('tenants')
@Idempotent()
class TenantsController {
  @Post()
  @UseInterceptors(TenantScoped)
  create(@Headers('x-tenant') tenant: string) {
    return { tenant, run: ++tenantRuns };
  }
}

/** Boots an app with the module, `ThingsController` (or the given controllers) and providers. */
async function boot(
  idempotency: ReturnType<typeof IdempotencyModule.forRoot>,
  {
    controllers = [ThingsController],
    providers = [],
  }: Pick<ModuleMetadata, 'controllers' | 'providers'> = {},
) {
  @Module({ imports: [idempotency], controllers, providers })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
  await app.listen(0, '127.0.0.1');
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
}

@Injectable()
class ConfigService {
  readonly url = testRedisUrl();
}

@Module({ providers: [ConfigService], exports: [ConfigService] })
class ConfigModule {}

@Injectable()
class IdempotencyConfig {
  createIdempotencyOptions(): IdempotencyModuleOptions {
    return { store: new MemoryIdempotencyStore(), keyPrefix: 'use-class:' };
  }
}

describe('IdempotencyModule', () => {
  it.each([
    [
      'useFactory with inject',
      () =>
        IdempotencyModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({
            redis: config.url,
            keyPrefix: uniquePrefix('factory'),
          }),
        }),
    ],
    ['useClass', () => IdempotencyModule.forRootAsync({ useClass: IdempotencyConfig })],
    [
      'useExisting',
      () =>
        IdempotencyModule.forRootAsync({
          imports: [
            {
              module: class ExistingModule {},
              providers: [IdempotencyConfig],
              exports: [IdempotencyConfig],
            },
          ],
          useExisting: IdempotencyConfig,
        }),
    ],
  ])('boots with forRootAsync(%s) and protects routes', async (_, make) => {
    const { app, url } = await boot(make());
    try {
      const key = `async-${Math.random()}`;
      const first = await post(url, '/things', { key });
      const replay = await post(url, '/things', { key });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
    } finally {
      await app.close();
    }
  });

  it.each([
    [{ lockTtl: 0 }, 'lockTtl must be a positive whole number, got 0'],
    [{ ttl: -5 }, 'ttl must be a positive whole number, got -5'],
    [{ storeTimeout: 1.5 }, 'storeTimeout must be a positive whole number'],
    [{ headerName: 'Bad Header' }, 'headerName must be a valid HTTP header name'],
    [{ replayHeaders: ['Set-Cookie'] }, 'Set-Cookie can never be stored or replayed'],
    [{ required: 'yes' }, 'required must be a boolean'],
    [{ storeTimeout: 2 ** 31 }, 'storeTimeout must be at most 2147483647 ms'],
    [{ lockTtl: 7e9 }, 'lockTtl must be at most 2147483647 ms'],
    [{ redis: '' }, 'redis must be a Redis URL'],
    [{ redis: 6379 }, 'redis must be a Redis URL'],
    [{ redis: null }, 'redis must be a Redis URL'],
    [{ redis: { clusterNodes: [] } }, 'redis.clusterNodes must be a non-empty array'],
    [{ onEvent: 'log' }, 'onEvent must be a function'],
    [{ metrics: 'x' }, 'metrics must be a boolean'],
  ])('refuses invalid options %j at bootstrap with a clear error', async (options, message) => {
    await expect(
      boot(IdempotencyModule.forRoot(options as unknown as IdempotencyModuleOptions)),
    ).rejects.toThrow(`IdempotencyModule: ${message}`);
  });

  it('refuses an ioredis client passed as store, and says to pass it as redis', async () => {
    const client = new Redis({ lazyConnect: true });
    await expect(
      boot(IdempotencyModule.forRoot({ store: client as unknown as MemoryIdempotencyStore })),
    ).rejects.toThrow(/store must be an IdempotencyStore .*pass an ioredis client as `redis`/);
  });

  it('refuses invalid @Idempotent() options when the class is defined', () => {
    expect(() => {
      class Bad {
        @Idempotent({ lockTtl: -1 })
        handler() {}
      }
      return Bad;
    }).toThrow('@Idempotent(): lockTtl must be a positive whole number, got -1');
  });

  it('keeps records of two controllers with the same class name apart', async () => {
    const make = (version: number) => {
      @Controller(`v${version}/refunds`)
      class RefundsController {
        @Post()
        @Idempotent()
        create() {
          return { version };
        }
      }
      return RefundsController;
    };
    @Module({
      imports: [IdempotencyModule.forRoot({ store: new MemoryIdempotencyStore() })],
      controllers: [make(1), make(2)],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
      expect((await post(url, '/v1/refunds', { key: 'same' })).json()).toEqual({ version: 1 });
      const v2 = await post(url, '/v2/refunds', { key: 'same' });
      expect(v2.json()).toEqual({ version: 2 });
      expect(v2.headers.get('idempotent-replayed')).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('uses the in-memory store when neither redis nor store is given', async () => {
    const { app } = await boot(IdempotencyModule.forRoot({}));
    try {
      expect(app.get(IdempotencyStore)).toBeInstanceOf(MemoryIdempotencyStore);
    } finally {
      await app.close();
    }
  });

  it('closes a client it created, and never one it was given', async () => {
    const created = await boot(IdempotencyModule.forRoot({ redis: testRedisUrl() }));
    const store = created.app.get(IdempotencyStore) as RedisIdempotencyStore;
    expect(store.client.status).toBe('ready');
    await created.app.close();
    expect(store.client.status).toBe('end');

    const own = new Redis(testRedisUrl());
    const given = await boot(IdempotencyModule.forRoot({ redis: own }));
    await given.app.close();
    expect(own.status).toBe('ready');
    expect(await own.ping()).toBe('PONG');
    await own.quit();
  });

  it('uses an app-owned client injected through forRootAsync, and closes only its own subscriber', async () => {
    // The shape of @nestjs-modules/ioredis and similar: the app's module owns the client.
    const REDIS_CLIENT = Symbol('REDIS_CLIENT');
    const own = new Redis(testRedisUrl());
    @Module({ providers: [{ provide: REDIS_CLIENT, useValue: own }], exports: [REDIS_CLIENT] })
    class AppRedisModule {}
    const { app, url } = await boot(
      IdempotencyModule.forRootAsync({
        imports: [AppRedisModule],
        inject: [REDIS_CLIENT],
        useFactory: (client: Redis) => ({ redis: client, keyPrefix: uniquePrefix('byo') }),
      }),
    );
    const store = app.get(IdempotencyStore) as RedisIdempotencyStore;
    expect(store.client).toBe(own);
    const key = `byo-${Math.random()}`;
    await post(url, '/things', { key });
    expect((await post(url, '/things', { key })).headers.get('idempotent-replayed')).toBe('true');
    // Wait mode opens a subscriber connection: that one is the module's to close.
    const unwatch = await store.watch('byo-channel', () => {});
    unwatch?.();
    const { subscriber } = (store as unknown as { subscriptions: { subscriber: Redis } })
      .subscriptions;
    expect(subscriber.status).toBe('ready');
    await app.close();
    expect(subscriber.status).toBe('end');
    expect(own.status).toBe('ready');
    expect(await own.ping()).toBe('PONG');
    await own.quit();
  });

  it('binds the interceptor to @Idempotent() routes only: other routes never reach it', async () => {
    const intercept = jest.spyOn(IdempotencyInterceptor.prototype, 'intercept');
    const { app, url } = await boot(IdempotencyModule.forRoot({}));
    try {
      expect((await post(url, '/things/plain', { key: 'plain' })).status).toBe(201);
      expect(intercept).not.toHaveBeenCalled();
      expect((await post(url, '/things', { key: 'bound' })).status).toBe(201);
      expect(intercept).toHaveBeenCalledTimes(1);
    } finally {
      intercept.mockRestore();
      await app.close();
    }
  });

  it('claims again when an outer interceptor retries, and stores the attempt that succeeds', async () => {
    const { APP_INTERCEPTOR } = await import('@nestjs/core');
    const { app, url } = await boot(IdempotencyModule.forRoot({}), {
      controllers: [FlakyController],
      providers: [{ provide: APP_INTERCEPTOR, useClass: RetryOnce }],
    });
    try {
      const first = await post(url, '/flaky', { key: 'retried' });
      expect(first.json()).toEqual({ attempt: 2 });
      const replay = await post(url, '/flaky', { key: 'retried' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json()).toEqual({ attempt: 2 });
      expect(attempts).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('lets a subclass bound to a method handle it, though @Idempotent() marks its controller', async () => {
    const { app, url } = await boot(IdempotencyModule.forRoot({}), {
      controllers: [TenantsController],
    });
    try {
      const a = await post(url, '/tenants', { key: 'shared', headers: { 'x-tenant': 'a' } });
      const b = await post(url, '/tenants', { key: 'shared', headers: { 'x-tenant': 'b' } });
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      expect([a.json(), b.json()]).toEqual([
        { tenant: 'a', run: 1 },
        { tenant: 'b', run: 2 },
      ]);
      const againA = await post(url, '/tenants', { key: 'shared', headers: { 'x-tenant': 'a' } });
      expect(againA.headers.get('idempotent-replayed')).toBe('true');
    } finally {
      await app.close();
    }
  });

  it('claims a request once with globalInterceptor: true as well (global and route-bound)', async () => {
    const { app, url } = await boot(IdempotencyModule.forRoot({ globalInterceptor: true }));
    try {
      const first = await post(url, '/things', { key: 'global-too' });
      const replay = await post(url, '/things', { key: 'global-too' });
      expect(first.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json()).toEqual(first.json());
    } finally {
      await app.close();
    }
  });

  it('registers no global interceptor by default, so a subclass can be registered globally', async () => {
    const seen: string[] = [];
    @Injectable()
    class AuditedInterceptor extends IdempotencyInterceptor {
      protected override getScope(...args: Parameters<IdempotencyInterceptor['getScope']>) {
        seen.push(args[1]);
        return super.getScope(...args);
      }
    }
    const { APP_INTERCEPTOR } = await import('@nestjs/core');
    const { app, url } = await boot(IdempotencyModule.forRoot({}), {
      providers: [{ provide: APP_INTERCEPTOR, useClass: AuditedInterceptor }],
    });
    try {
      await post(url, '/things', { key: 'subclass' });
      const replay = await post(url, '/things', { key: 'subclass' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      // The subclass took each request; the interceptor @Idempotent() binds stepped aside.
      expect(seen).toEqual(['ThingsController.create', 'ThingsController.create']);
    } finally {
      await app.close();
    }
  });
});
