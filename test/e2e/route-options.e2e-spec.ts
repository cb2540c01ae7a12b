import {
  ArgumentsHost,
  Catch,
  Controller,
  ExceptionFilter,
  Headers,
  HttpException,
  INestApplication,
  Module,
  Post,
  Res,
  Version,
  VersioningType,
} from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyEvent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyStore,
} from '../../lib';
import { appUrl, listen } from '../support/http-app';
import {
  deleteKeysUnder,
  inspectionClient,
  STORES,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { deferred, Executions, Platform, PLATFORMS, post } from '../support/test-app';

/** Handler runs per name: the side channel the tests count executions through. */
const runs = new Executions();
const hit = (name: string) => runs.hit(name);
const count = (name: string) => runs.count(name);

/** Two controllers of the same class name and path, in two modules under two RouterModule paths. */
function usersModule(version: string) {
  @Controller('users')
  class UsersController {
    @Post()
    @Idempotent()
    create() {
      return { version, run: hit(`users-${version}`) };
    }
  }
  @Module({ controllers: [UsersController] })
  class UsersModule {}
  return UsersModule;
}
const V1Users = usersModule('v1');
const V2Users = usersModule('v2');

/** The same name and path again, with fingerprints off: a replay across them would show. */
function loose(version: string) {
  @Controller('loose')
  class LooseController {
    @Post()
    @Idempotent({ fingerprint: false })
    create() {
      return { version, run: hit(`loose-${version}`) };
    }
  }
  @Module({ controllers: [LooseController] })
  class LooseModule {}
  return LooseModule;
}
const V1Loose = loose('v1');
const V2Loose = loose('v2');

/** A domain error an exception filter answers with 402. */
class CardDeclinedError extends Error {
  constructor(readonly declineCode: string) {
    super(`card declined: ${declineCode}`);
  }
}

@Catch(CardDeclinedError)
class CardDeclinedFilter implements ExceptionFilter {
  catch(error: CardDeclinedError, host: ArgumentsHost) {
    const response = host.switchToHttp().getResponse<{
      status?: (code: number) => { json?: unknown; send: (body: unknown) => void };
      code?: (code: number) => { send: (body: unknown) => void };
    }>();
    const body = { declined: true, message: error.message, class: error.constructor.name };
    // Express and Fastify answer differently.
    if (typeof response.code === 'function') response.code(402).send(body);
    else response.status!(402).send(body);
  }
}

/** Gates that hold the slow handler open until a test releases it. */
const gates: { promise: Promise<void>; started: () => void }[] = [];

@Controller('features')
@Idempotent()
class FeaturesController {
  @Post('declined')
  @Idempotent({ storeErrors: ['4xx'], replayHeaders: ['x-decline-id', 'content-type'] })
  declined(@Res({ passthrough: true }) response: { header?: unknown; setHeader?: unknown }) {
    const run = hit('declined');
    const set = (typeof response.header === 'function' ? response.header : response.setHeader) as (
      this: unknown,
      name: string,
      value: string,
    ) => void;
    set.call(response, 'x-decline-id', `d-${run}`);
    throw new HttpException({ declined: true, run }, 402);
  }

  @Post('declined-class')
  @Idempotent({ storeErrors: [CardDeclinedError] })
  declinedClass() {
    throw new CardDeclinedError(`insufficient-${hit('declined-class')}`);
  }

  @Post('predicate')
  @Idempotent({
    storeErrors: [(error) => error instanceof HttpException && error.getStatus() === 409],
  })
  predicate(@Headers('x-status') status: string) {
    hit('predicate');
    throw new HttpException('no', Number(status));
  }

  @Post('crash')
  @Idempotent({ storeErrors: ['4xx'] })
  crash() {
    hit('crash');
    throw new Error('boom');
  }

  @Post('amount')
  @Idempotent({
    fingerprint: (context) =>
      context.switchToHttp().getRequest<{ body: { amount: number } }>().body.amount,
  })
  amount() {
    return { run: hit('amount') };
  }

  @Post('async-fingerprint')
  @Idempotent({
    fingerprint: async (context) =>
      context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-order'],
  })
  asyncFingerprint() {
    return { run: hit('async-fingerprint') };
  }

  @Post('failing-fingerprint')
  @Idempotent({
    fingerprint: async () => {
      throw new Error('fingerprint backend down');
    },
  })
  failingFingerprint() {
    return { run: hit('failing-fingerprint') };
  }

  @Post('async-key')
  @Idempotent({
    key: async (context) =>
      context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-op-id'],
  })
  asyncKey() {
    return { run: hit('async-key') };
  }

  @Post('failing-key')
  @Idempotent({
    key: () => {
      throw new Error('cannot read the key');
    },
  })
  failingKey() {
    return { run: hit('failing-key') };
  }

  @Post('pay/card')
  @Idempotent({ keySpace: 'payments' })
  payByCard() {
    return { by: 'card', run: hit('pay-card') };
  }

  @Post('pay/bank')
  @Idempotent({ keySpace: 'payments', fingerprint: false })
  payByBank() {
    return { by: 'bank', run: hit('pay-bank') };
  }

  @Post('status')
  @Idempotent({ statusHeader: true })
  async status() {
    const run = hit('status');
    const gate = gates.shift();
    gate?.started();
    await gate?.promise;
    return { run };
  }

  @Post('status-required')
  @Idempotent({ statusHeader: true, required: true })
  statusRequired() {
    return { run: hit('status-required') };
  }

  @Post('off')
  @Idempotent(false)
  off() {
    return { run: hit('off') };
  }

  @Post('off-flag')
  @Idempotent({ enabled: false })
  offFlag() {
    return { run: hit('off-flag') };
  }

  @Post('on')
  on() {
    return { run: hit('on') };
  }
}

/** Two versions of one path, told apart by a header: Nest routes them to two handlers. */
@Controller('versioned')
class VersionedController {
  @Post()
  @Version('1')
  @Idempotent({ fingerprint: false })
  one() {
    return { version: 1, run: hit('versioned-1') };
  }

  @Post()
  @Version('2')
  @Idempotent({ fingerprint: false })
  two() {
    return { version: 2, run: hit('versioned-2') };
  }
}

@Module({ controllers: [VersionedController] })
class VersionedModule {}

async function start(
  platform: Platform,
  options: IdempotencyModuleOptions,
  events: IdempotencyEvent[],
): Promise<INestApplication> {
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        scope: 'public',
        compression: false,
        ...options,
        onEvent: (event) => events.push(event),
      }),
      V1Users,
      V2Users,
      V1Loose,
      V2Loose,
      VersionedModule,
      RouterModule.register([
        { path: 'v1', module: V1Users },
        { path: 'v2', module: V2Users },
        { path: 'v1', module: V1Loose },
        { path: 'v2', module: V2Loose },
      ]),
    ],
    controllers: [FeaturesController],
  })
  class AppModule {}
  const { app } = await listen(platform, AppModule, (created) => {
    created.useGlobalFilters(new CardDeclinedFilter());
    created.enableVersioning({ type: VersioningType.HEADER, header: 'x-api-version' });
  });
  return app;
}

describe.each(PLATFORMS)('route options on %s', (platform) => {
  describe.each(STORES)('with the %s store', (storeName) => {
    const prefix = uniquePrefix(`route-options-${platform}-${storeName}`);
    const events: IdempotencyEvent[] = [];
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      app = await start(
        platform,
        storeName === 'redis' ? { redis: testRedisUrl(), keyPrefix: prefix } : {},
        events,
      );
      url = await appUrl(app);
    });
    afterAll(async () => {
      await app.close();
      if (storeName !== 'redis') return;
      const client = inspectionClient();
      await deleteKeysUnder(client, prefix);
      await client.quit();
    });

    describe('routes Nest tells apart keep their own records', () => {
      it('same-named controllers under two RouterModule paths run once each', async () => {
        const key = randomUUID();
        const [v1, v2] = [count('users-v1'), count('users-v2')];
        const first = await post(url, '/v1/users', { key, body: { name: 'a' } });
        const second = await post(url, '/v2/users', { key, body: { name: 'a' } });
        expect([first.status, second.status]).toEqual([201, 201]);
        expect(second.json()).toEqual({ version: 'v2', run: expect.any(Number) });
        expect([count('users-v1') - v1, count('users-v2') - v2]).toEqual([1, 1]);
        // And each still replays its own.
        const again = await post(url, '/v2/users', { key, body: { name: 'a' } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.text).toBe(second.text);
      });

      it('never replays one module’s response on the other, even with fingerprints off', async () => {
        const key = randomUUID();
        await post(url, '/v1/loose', { key });
        const v2 = await post(url, '/v2/loose', { key });
        expect(v2.status).toBe(201);
        expect(v2.headers.get('idempotent-replayed')).toBeNull();
        expect(v2.json()).toMatchObject({ version: 'v2' });
      });

      it('header-versioned handlers of one path keep their own records', async () => {
        const key = randomUUID();
        const one = await post(url, '/versioned', { key, headers: { 'x-api-version': '1' } });
        const two = await post(url, '/versioned', { key, headers: { 'x-api-version': '2' } });
        expect(one.json()).toMatchObject({ version: 1 });
        expect(two.json()).toMatchObject({ version: 2 });
        expect(two.headers.get('idempotent-replayed')).toBeNull();
      });

      it('names the route in its events by method and pattern as registered', async () => {
        const key = randomUUID();
        events.length = 0;
        await post(url, '/v2/users', { key });
        const claimed = events.find((event) => event.type === 'claimed');
        expect(claimed?.route).toBe('POST /v2/users');
      });
    });

    describe('storeErrors', () => {
      it('replays a stored 4xx with its status, body and allowlisted headers, without running again', async () => {
        const key = randomUUID();
        const before = count('declined');
        const first = await post(url, '/features/declined', { key, body: { card: 1 } });
        const retry = await post(url, '/features/declined', { key, body: { card: 1 } });
        expect(first.status).toBe(402);
        expect(retry.status).toBe(402);
        expect(retry.text).toBe(first.text);
        expect(retry.headers.get('x-decline-id')).toBe(first.headers.get('x-decline-id'));
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(first.headers.get('idempotent-replayed')).toBeNull();
        expect(count('declined') - before).toBe(1);
      });

      it('rebuilds a listed exception class, so its own filter answers the replay', async () => {
        const key = randomUUID();
        const before = count('declined-class');
        const first = await post(url, '/features/declined-class', { key });
        const retry = await post(url, '/features/declined-class', { key });
        expect(first.status).toBe(402);
        expect(first.json()).toMatchObject({ declined: true, class: 'CardDeclinedError' });
        expect(retry.status).toBe(402);
        expect(retry.text).toBe(first.text);
        expect(count('declined-class') - before).toBe(1);
      });

      it('stores what a predicate matches and releases the rest', async () => {
        const stored = randomUUID();
        const before = count('predicate');
        expect(
          (await post(url, '/features/predicate', { key: stored, headers: { 'x-status': '409' } }))
            .status,
        ).toBe(409);
        const replayed = await post(url, '/features/predicate', {
          key: stored,
          headers: { 'x-status': '409' },
        });
        expect(replayed.headers.get('idempotent-replayed')).toBe('true');
        expect(count('predicate') - before).toBe(1);
        const released = randomUUID();
        expect(
          (
            await post(url, '/features/predicate', {
              key: released,
              headers: { 'x-status': '400' },
            })
          ).status,
        ).toBe(400);
        expect(
          (
            await post(url, '/features/predicate', {
              key: released,
              headers: { 'x-status': '400' },
            })
          ).status,
        ).toBe(400);
        expect(count('predicate') - before).toBe(3);
      });

      it('releases errors the policy does not match (a 500), as by default', async () => {
        const key = randomUUID();
        const before = count('crash');
        expect((await post(url, '/features/crash', { key })).status).toBe(500);
        expect((await post(url, '/features/crash', { key })).status).toBe(500);
        expect(count('crash') - before).toBe(2);
      });
    });

    describe('custom fingerprints and keys', () => {
      it('a fingerprint function decides what a retry must repeat', async () => {
        const key = randomUUID();
        const before = count('amount');
        const first = await post(url, '/features/amount', { key, body: { amount: 5, note: 'a' } });
        const other = await post(url, '/features/amount', { key, body: { amount: 5, note: 'b' } });
        expect(other.headers.get('idempotent-replayed')).toBe('true');
        expect(other.text).toBe(first.text);
        const changed = await post(url, '/features/amount', { key, body: { amount: 6 } });
        expect(changed.status).toBe(422);
        expect(count('amount') - before).toBe(1);
      });

      it('an async fingerprint function works as a sync one', async () => {
        const key = randomUUID();
        await post(url, '/features/async-fingerprint', { key, headers: { 'x-order': '1' } });
        const same = await post(url, '/features/async-fingerprint', {
          key,
          headers: { 'x-order': '1' },
        });
        const other = await post(url, '/features/async-fingerprint', {
          key,
          headers: { 'x-order': '2' },
        });
        expect(same.headers.get('idempotent-replayed')).toBe('true');
        expect(other.status).toBe(422);
      });

      it('an async key function reads the key', async () => {
        const before = count('async-key');
        const headers = { 'x-op-id': randomUUID() };
        await post(url, '/features/async-key', { headers });
        const retry = await post(url, '/features/async-key', { headers });
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(count('async-key') - before).toBe(1);
      });

      it.each(['failing-fingerprint', 'failing-key'])(
        'a %s function that throws answers 400, runs nothing and stores nothing',
        async (route) => {
          const key = randomUUID();
          const before = count(route);
          events.length = 0;
          const response = await post(url, `/features/${route}`, { key });
          expect(response.status).toBe(400);
          expect(response.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_INVALID' });
          expect(count(route)).toBe(before);
          expect(events.map((event) => event.type)).toEqual(['rejected']);
        },
      );
    });

    describe('keySpace', () => {
      it('shares one key between the routes of a space: sent to another, it is refused', async () => {
        const key = randomUUID();
        const card = await post(url, '/features/pay/card', { key, body: { amount: 1 } });
        expect(card.status).toBe(201);
        const bank = await post(url, '/features/pay/bank', { key, body: { amount: 1 } });
        expect(bank.status).toBe(422);
        const again = await post(url, '/features/pay/card', { key, body: { amount: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      });

      it('covers method and path even where the route hashes no payload', async () => {
        const key = randomUUID();
        await post(url, '/features/pay/bank', { key, body: { amount: 1 } });
        expect((await post(url, '/features/pay/card', { key, body: { amount: 1 } })).status).toBe(
          422,
        );
        const bank = await post(url, '/features/pay/bank', { key, body: { amount: 2 } });
        expect(bank.headers.get('idempotent-replayed')).toBe('true');
      });
    });

    describe('statusHeader', () => {
      it('says first-run, replayed, in-progress, key-reused and key-invalid', async () => {
        const key = randomUUID();
        const gate = deferred();
        const started = deferred();
        gates.push({ promise: gate.promise, started: started.resolve });
        const first = post(url, '/features/status', { key, body: { a: 1 } });
        await started.promise;
        const busy = await post(url, '/features/status', { key, body: { a: 1 } });
        gate.resolve();
        const done = await first;
        const replay = await post(url, '/features/status', { key, body: { a: 1 } });
        const reused = await post(url, '/features/status', { key, body: { a: 2 } });
        const invalid = await post(url, '/features/status', { key: 'a,b', body: { a: 1 } });
        expect(
          [done, busy, replay, reused, invalid].map((r) => [
            r.status,
            r.headers.get('idempotency-status'),
          ]),
        ).toEqual([
          [201, 'first-run'],
          [409, 'in-progress'],
          [201, 'replayed'],
          [422, 'key-reused'],
          [400, 'key-invalid'],
        ]);
      });

      it('says key-missing for a required key that is not sent', async () => {
        const response = await post(url, '/features/status-required');
        expect([response.status, response.headers.get('idempotency-status')]).toEqual([
          400,
          'key-missing',
        ]);
      });

      it('is off by default', async () => {
        const response = await post(url, '/v1/users', { key: randomUUID() });
        expect(response.headers.get('idempotency-status')).toBeNull();
      });
    });

    describe('opting a route out', () => {
      it.each(['off', 'off-flag'])(
        '@Idempotent(%s) inside an idempotent controller runs every time',
        async (route) => {
          const key = randomUUID();
          const before = count(route);
          await post(url, `/features/${route}`, { key });
          const again = await post(url, `/features/${route}`, { key });
          expect(again.headers.get('idempotent-replayed')).toBeNull();
          expect(count(route) - before).toBe(2);
        },
      );

      it('the controller’s other routes stay idempotent', async () => {
        const key = randomUUID();
        await post(url, '/features/on', { key });
        const again = await post(url, '/features/on', { key });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      });
    });
  });
});

describe('statusHeader when the store is down', () => {
  it.each(PLATFORMS)('says store-unavailable with the 503 on %s', async (platform) => {
    class DownStore extends IdempotencyStore {
      claim(): never {
        throw new Error('down');
      }
      complete = this.claim;
      release = this.claim;
      extend = this.claim;
    }
    const app = await start(platform, { store: new DownStore(), statusHeader: true }, []);
    try {
      const response = await post(await appUrl(app), '/v1/users', { key: randomUUID() });
      expect(response.status).toBe(503);
      expect(response.headers.get('idempotency-status')).toBe('store-unavailable');
    } finally {
      await app.close();
    }
  });
});
