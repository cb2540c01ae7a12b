import {
  CallHandler,
  CanActivate,
  ClassSerializerInterceptor,
  Controller,
  ExecutionContext,
  Injectable,
  INestApplication,
  Logger,
  Module,
  NestInterceptor,
  Post,
  RequestTimeoutException,
  Scope,
  SerializeOptions,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { Exclude, Expose, Transform } from 'class-transformer';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { catchError, map, Observable, tap, throwError, timeout } from 'rxjs';
import {
  Idempotent,
  IdempotencyInterceptor,
  IdempotencyModule,
  IdempotencyModuleOptions,
  MemoryIdempotencyStore,
} from '../../lib';
import { listen } from '../support/http-app';
import {
  deleteKeysUnder,
  inspectionClient,
  bytesUnder,
  recordKeysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { deferred, Executions, Platform, PLATFORMS, post } from '../support/test-app';

/** Counts handler runs and interceptor runs per name. */
const runs = new Executions();
const hit = (name: string) => runs.hit(name);

/** Sets `request.user` from the `x-user` header (JSON), as an auth guard would. */
@Injectable()
class UserFromHeader implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string>; user?: unknown }>();
    if (request.headers['x-user']) request.user = JSON.parse(request.headers['x-user']);
    return true;
  }
}

/** Sets a header and counts its runs: a replay must run none of the route's interceptors. */
@Injectable()
class Stamp implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler().name;
    const n = hit(`stamp:${handler}`);
    const response = context
      .switchToHttp()
      .getResponse<{ header?: unknown; setHeader?: unknown }>();
    const set = (name: string, value: string) =>
      typeof response.header === 'function'
        ? (response.header as (n: string, v: string) => void)(name, value)
        : (response.setHeader as (n: string, v: string) => void)(name, value);
    set('x-stamp', String(n));
    return next.handle().pipe(tap(() => undefined));
  }
}

class Card {
  @Expose() id: number;
  @Transform(({ value }: { value: string }) => `**** ${value.slice(-4)}`)
  number: string;
  @Exclude() cvc: string;
  _internal = 'secret-internal';
  constructor(id: number) {
    this.id = id;
    this.number = '4111111111111111';
    this.cvc = 'secret-cvc-987';
  }
}

class CardView {
  id!: number;
  @Exclude() cvc!: string;
}

@Controller('orders')
@UseGuards(UserFromHeader)
class OrdersController {
  @Post()
  @Idempotent()
  create() {
    return { run: hit('orders') };
  }

  @Post('public')
  @Idempotent({ scope: 'public' })
  shared() {
    return { run: hit('public') };
  }

  @Post('tenant')
  @Idempotent({ scope: (context) => context.switchToHttp().getRequest().headers['x-tenant'] })
  tenant() {
    return { run: hit('tenant') };
  }

  @Post('tenant-or-user')
  @Idempotent({
    scope: (context) =>
      context.switchToHttp().getRequest<{ user?: { tenantId?: string } }>().user?.tenantId,
  })
  tenantOrUser() {
    return { run: hit('tenant-or-user') };
  }

  @Post('card')
  @Idempotent()
  card() {
    hit('card');
    return new Card(1);
  }

  @Post('cards')
  @Idempotent()
  cards() {
    hit('cards');
    return { items: [new Card(1), new Card(2)], total: 2 };
  }

  @Post('view')
  @Idempotent()
  @SerializeOptions({ type: CardView })
  view() {
    hit('view');
    return { id: 7, cvc: 'secret-plain-cvc' };
  }

  @Post('slow')
  @Idempotent()
  async slow() {
    const n = hit('slow');
    const gate = gates.shift();
    gate?.started();
    await gate?.promise;
    return { run: n };
  }

  // Idempotent() above and below another method-level interceptor.
  @Post('below')
  @UseInterceptors(Stamp)
  @Idempotent()
  below() {
    return { run: hit('below') };
  }

  @Post('above')
  @Idempotent()
  @UseInterceptors(Stamp)
  above() {
    return { run: hit('above') };
  }
}

@Controller('stamped')
@UseInterceptors(Stamp)
class StampedController {
  @Post()
  @Idempotent({ scope: 'public' })
  stamped() {
    return { run: hit('stamped') };
  }
}

/** Answers 408 after 150 ms, as a typical timeout interceptor does; the handler runs on. */
@Injectable()
class Timeout150 implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      timeout(150),
      catchError(() => throwError(() => new RequestTimeoutException())),
    );
  }
}

@Controller('timed')
class TimedController {
  @Post()
  @UseInterceptors(Timeout150)
  @Idempotent({ scope: 'public' })
  async slow() {
    const run = hit('timed');
    await gates.shift()?.promise;
    return { run };
  }
}

/** A user's subclass, bound below the route's own mapping interceptor. */
@Injectable()
class MyIdempotency extends IdempotencyInterceptor {}

/** Hides `secret`, as a route's own serializer would. */
@Injectable()
class HideSecret implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(map(({ secret: _secret, ...rest }: Record<string, unknown>) => rest));
  }
}

@Controller('subclassed')
class SubclassedController {
  @Post()
  @UseInterceptors(HideSecret, MyIdempotency)
  @Idempotent({ scope: 'public' })
  card() {
    return { id: hit('subclassed'), secret: 'secret-subclassed' };
  }
}

/** One idempotent handler, inherited by a controller with interceptors of its own and one without. */
class PaymentsBase {
  @Post()
  @Idempotent({ scope: 'public' })
  pay() {
    return { run: hit(`pay:${this.constructor.name}`) };
  }
}

@Controller('inherited-stamped')
@UseInterceptors(Stamp)
class StampedPayments extends PaymentsBase {}

@Controller('inherited-plain')
class PlainPayments extends PaymentsBase {}

/** Gates the slow handler waits on, one per run. */
const gates: { promise: Promise<void>; started: () => void }[] = [];

async function start(
  platform: Platform,
  options: IdempotencyModuleOptions,
): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [IdempotencyModule.forRoot({ compression: false, ...options })],
    controllers: [
      OrdersController,
      StampedController,
      StampedPayments,
      PlainPayments,
      SubclassedController,
      TimedController,
    ],
    providers: [MyIdempotency],
  })
  class AppModule {}
  return listen(platform, AppModule, (app) =>
    app.useGlobalInterceptors(
      new ClassSerializerInterceptor(app.get(Reflector), { excludePrefixes: ['_'] }),
    ),
  );
}

const alice = { 'x-user': JSON.stringify({ id: 'alice', token: 't1', iat: 1 }) };
const bob = { 'x-user': JSON.stringify({ id: 'bob', token: 't2', iat: 1 }) };
const newKey = () => randomUUID();

describe.each(PLATFORMS)('safe defaults on %s', (platform) => {
  describe.each(['redis', 'memory'] as const)('with the %s store', (storeName) => {
    const prefix = uniquePrefix(`safe-${platform}-${storeName}`);
    let redis: Redis;
    let url: string;
    let app: INestApplication;

    beforeAll(async () => {
      redis = inspectionClient();
      ({ app, url } = await start(
        platform,
        storeName === 'redis'
          ? { redis: testRedisUrl(), keyPrefix: prefix }
          : { store: new MemoryIdempotencyStore() },
      ));
    });
    afterAll(async () => {
      await app.close();
      await deleteKeysUnder(redis, prefix);
      redis.disconnect();
    });

    describe('records are scoped to the caller', () => {
      it("never replays one principal's response to another using the same key and body", async () => {
        const key = newKey();
        const a = await post(url, '/orders', { key, body: { amount: 1 }, headers: alice });
        const b = await post(url, '/orders', { key, body: { amount: 1 }, headers: bob });
        expect(a.status).toBe(201);
        expect(b.status).toBe(201);
        expect(b.headers.get('idempotent-replayed')).toBeNull();
        expect(b.json()).not.toEqual(a.json());
        // Each replays its own, also after a token refresh (token and iat are not the identity).
        const refreshed = { 'x-user': JSON.stringify({ id: 'alice', token: 't9', iat: 2 }) };
        const again = await post(url, '/orders', { key, body: { amount: 1 }, headers: refreshed });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.json()).toEqual(a.json());
      });

      it('scopes by sub when the principal has no id (JWT payloads)', async () => {
        const key = newKey();
        const one = { 'x-user': JSON.stringify({ sub: 'u-1', exp: 1 }) };
        const two = { 'x-user': JSON.stringify({ sub: 'u-2', exp: 1 }) };
        const a = await post(url, '/orders', { key, body: {}, headers: one });
        const b = await post(url, '/orders', { key, body: {}, headers: two });
        expect(b.headers.get('idempotent-replayed')).toBeNull();
        expect(b.json()).not.toEqual(a.json());
      });

      it("never lets one principal's claim make another's request fail with 422", async () => {
        const key = newKey();
        await post(url, '/orders', { key, body: { amount: 1 }, headers: alice });
        const b = await post(url, '/orders', { key, body: { amount: 2 }, headers: bob });
        expect(b.status).toBe(201);
      });

      it('fails closed (500, nothing run or stored) for a principal without a stable id', async () => {
        const before = runs.counts.get('orders') ?? 0;
        const stored = storeName === 'redis' ? (await recordKeysUnder(redis, prefix)).length : 0;
        const anonymous = { 'x-user': JSON.stringify({ token: 'only-a-token' }) };
        const response = await post(url, '/orders', {
          key: newKey(),
          body: {},
          headers: anonymous,
        });
        expect(response.status).toBe(500);
        expect(runs.counts.get('orders') ?? 0).toBe(before);
        if (storeName === 'redis')
          expect(await recordKeysUnder(redis, prefix)).toHaveLength(stored);
      });

      it("shares records with scope: 'public', and a scope function wins over the principal", async () => {
        const key = newKey();
        const a = await post(url, '/orders/public', { key, body: {}, headers: alice });
        const b = await post(url, '/orders/public', { key, body: {}, headers: bob });
        expect(b.headers.get('idempotent-replayed')).toBe('true');
        expect(b.json()).toEqual(a.json());
        const tenantKey = newKey();
        const t1 = await post(url, '/orders/tenant', {
          key: tenantKey,
          headers: { ...alice, 'x-tenant': 'acme' },
        });
        const t2 = await post(url, '/orders/tenant', {
          key: tenantKey,
          headers: { ...bob, 'x-tenant': 'acme' },
        });
        expect(t2.headers.get('idempotent-replayed')).toBe('true');
        expect(t2.json()).toEqual(t1.json());
      });

      it('falls back to the principal when the scope function returns none', async () => {
        const key = newKey();
        const a = await post(url, '/orders/tenant-or-user', { key, headers: alice });
        const b = await post(url, '/orders/tenant-or-user', { key, headers: bob });
        expect(b.headers.get('idempotent-replayed')).toBeNull();
        expect(b.json()).not.toEqual(a.json());
      });

      it('warns once for a route with no principal and no scope', async () => {
        const warn = jest.spyOn(Logger.prototype, 'warn');
        try {
          await post(url, '/orders', { key: newKey(), body: {} });
          await post(url, '/orders', { key: newKey(), body: {} });
          const unscoped = warn.mock.calls.filter(([message]) =>
            String(message).includes('no principal'),
          );
          expect(unscoped).toHaveLength(1);
        } finally {
          warn.mockRestore();
        }
      });
    });

    describe('stores exactly what the global serializer sends', () => {
      it.each([
        ['/orders/card', { id: 1, number: '**** 1111' }],
        [
          '/orders/cards',
          {
            items: [
              { id: 1, number: '**** 1111' },
              { id: 2, number: '**** 1111' },
            ],
            total: 2,
          },
        ],
        ['/orders/view', { id: 7 }],
        ['/subclassed', { id: expect.any(Number) }],
      ])('%s: no secret in the store, replay byte for byte', async (path, expected) => {
        const key = newKey();
        const first = await post(url, path, { key, headers: alice });
        expect(first.status).toBe(201);
        expect(first.json()).toEqual(expected);
        const replay = await post(url, path, { key, headers: alice });
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.bytes.equals(first.bytes)).toBe(true);
        if (storeName === 'redis') {
          // Every key under the prefix, the listing index too.
          const raw = (await bytesUnder(redis, prefix)).toString('latin1');
          expect(raw).not.toMatch(/secret|4111111111111111/);
        }
      });
    });

    describe('@Idempotent() is the outermost interceptor of its route', () => {
      it.each([
        ['/orders/below', 'below'],
        ['/orders/above', 'above'],
        ['/stamped', 'stamped'],
      ])('%s: a replay runs none of the route interceptors', async (path, handler) => {
        const key = newKey();
        const first = await post(url, path, { key, headers: alice });
        const stamps = runs.counts.get(`stamp:${handler}`);
        const replay = await post(url, path, { key, headers: alice });
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(runs.counts.get(`stamp:${handler}`)).toBe(stamps);
        expect(replay.headers.get('x-stamp')).toBeNull();
        expect(first.headers.get('x-stamp')).toBe(String(stamps));
      });
    });

    it('keeps an inherited handler idempotent on every controller that inherits it', async () => {
      for (const path of ['/inherited-stamped', '/inherited-plain']) {
        const key = newKey();
        const first = await post(url, path, { key });
        const replay = await post(url, path, { key });
        expect(first.status).toBe(201);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.json()).toEqual(first.json());
      }
    });

    it('keeps the claim when a timeout interceptor inside gave up: a retry gets 409, not a second run', async () => {
      const held = deferred();
      gates.push({ promise: held.promise, started: () => undefined });
      const key = newKey();
      const before = runs.counts.get('timed') ?? 0;
      expect((await post(url, '/timed', { key })).status).toBe(408);
      expect((await post(url, '/timed', { key })).status).toBe(409);
      held.resolve();
      expect(runs.counts.get('timed')).toBe(before + 1);
    });

    describe('Retry-After on 409', () => {
      it('follows how long the handler takes, not the 30 s lease', async () => {
        // One timed run of about 2.2 s.
        const timed = deferred();
        gates.push({ promise: timed.promise, started: () => undefined });
        const timer = setTimeout(() => timed.resolve(), 2_200);
        await post(url, '/orders/slow', { key: newKey(), headers: alice });
        clearTimeout(timer);
        // A duplicate of the next run is told to come back in ~3 s, not 30.
        const held = deferred();
        const started = deferred();
        gates.push({ promise: held.promise, started: () => started.resolve() });
        const key = newKey();
        const first = post(url, '/orders/slow', { key, headers: alice });
        await started.promise;
        const duplicate = await post(url, '/orders/slow', { key, headers: alice });
        expect(duplicate.status).toBe(409);
        expect(Number(duplicate.headers.get('retry-after'))).toBe(3);
        held.resolve();
        expect((await first).status).toBe(201);
      });
    });
  });
});

const SCOPED_SERIALIZERS = {
  useClass: {
    provide: APP_INTERCEPTOR,
    useClass: ClassSerializerInterceptor,
    scope: Scope.REQUEST,
  },
  useFactory: {
    provide: APP_INTERCEPTOR,
    scope: Scope.REQUEST,
    inject: [Reflector],
    useFactory: (reflector: Reflector) => new ClassSerializerInterceptor(reflector),
  },
};

describe.each(
  PLATFORMS.flatMap((platform) => [
    [platform, 'useClass'] as const,
    [platform, 'useFactory'] as const,
  ]),
)('a request-scoped global serializer on %s (%s)', (platform, kind) => {
  const prefix = uniquePrefix(`safe-scoped-${platform}-${kind}`);
  let redis: Redis;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    redis = inspectionClient();
    @Module({
      imports: [
        IdempotencyModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix, compression: false }),
      ],
      controllers: [OrdersController],
      providers: [SCOPED_SERIALIZERS[kind]],
    })
    class AppModule {}
    ({ app, url } = await listen(platform, AppModule));
  });
  afterAll(async () => {
    await app.close();
    await deleteKeysUnder(redis, prefix);
    redis.disconnect();
  });

  it('is applied before storing too: no secret in the store, replay byte for byte', async () => {
    const key = newKey();
    const first = await post(url, '/orders/card', { key, headers: alice });
    expect(first.json()).toEqual({ id: 1, number: '**** 1111', _internal: 'secret-internal' });
    const replay = await post(url, '/orders/card', { key, headers: alice });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.bytes.equals(first.bytes)).toBe(true);
    const raw = (await bytesUnder(redis, prefix)).toString('latin1');
    expect(raw).not.toMatch(/4111111111111111|cvc/);
  });
});
