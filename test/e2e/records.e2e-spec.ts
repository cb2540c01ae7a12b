import {
  BadRequestException,
  Body,
  CanActivate,
  Controller,
  Delete,
  ExecutionContext,
  ForbiddenException,
  Get,
  HttpException,
  INestApplication,
  Injectable,
  Module,
  Post,
  Query,
  UseGuards,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyEvent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyRecords,
} from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { listen } from '../support/http-app';
import {
  cleanUpPrefix,
  deleteKeysUnder,
  inspectionClient,
  storeOptions,
  STORES,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { deferred, Executions, Platform, PLATFORMS, post } from '../support/test-app';

const runs = new Executions();
const hit = (name: string) => runs.hit(name);
const gates: Promise<void>[] = [];
const started: (() => void)[] = [];

/** Sets `request.user` from the `x-user` header, as an auth guard would. */
@Injectable()
class UserFromHeader implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string>; user?: unknown }>();
    if (request.headers['x-user']) request.user = { id: request.headers['x-user'] };
    return true;
  }
}

@Controller('payments')
@UseGuards(UserFromHeader)
class PaymentsController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { amount: body.amount, run: hit('create') };
  }

  @Post('slow')
  @Idempotent({ lockTtl: 60_000 })
  async slow() {
    const run = hit('slow');
    started.shift()?.();
    await gates.shift();
    return { run };
  }

  @Post('declined')
  @Idempotent({ storeErrors: [402] })
  declined() {
    hit('declined');
    throw new HttpException({ declined: true }, 402);
  }
}

// The README's recipe: the service behind the app's own authorisation (here: an operator role).
@Injectable()
class OperatorsOnly implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
    if (request.headers['x-role'] !== 'operator') throw new ForbiddenException();
    return true;
  }
}

@Controller('admin/idempotency')
@UseGuards(OperatorsOnly)
class IdempotencyAdminController {
  constructor(private readonly records: IdempotencyRecords) {}

  @Get()
  inspect(@Query('key') key: string, @Query('route') route: string, @Query('user') user?: string) {
    return this.records.inspect({
      key,
      route,
      user: user === undefined ? undefined : { id: user },
    });
  }

  @Delete()
  async remove(
    @Query('key') key: string,
    @Query('route') route: string,
    @Query('user') user?: string,
  ) {
    const query = { key, route, user: user === undefined ? undefined : { id: user } };
    return { deleted: await this.records.delete(query) };
  }
}

async function start(
  platform: Platform,
  options: IdempotencyModuleOptions,
  events: IdempotencyEvent[],
): ReturnType<typeof listen> {
  @Module({
    imports: [IdempotencyModule.forRoot({ ...options, onEvent: (event) => events.push(event) })],
    controllers: [PaymentsController, IdempotencyAdminController],
  })
  class AppModule {}
  return listen(platform, AppModule);
}

async function call(url: string, method: 'GET' | 'DELETE', query: Record<string, string>) {
  const response = await fetch(`${url}/admin/idempotency?${new URLSearchParams(query)}`, {
    method,
    headers: { 'x-role': 'operator' },
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe.each(PLATFORMS)('IdempotencyRecords on %s', (platform) => {
  describe.each(['memory', 'redis', 'postgres'] as const)('with the %s store', (storeName) => {
    const prefix = uniquePrefix(`records-${platform}-${storeName}`);
    const table = uniqueTable(`records_${platform}`);
    const events: IdempotencyEvent[] = [];
    const ttl = 3_600_000;
    let app: INestApplication;
    let url: string;
    let records: IdempotencyRecords;

    beforeAll(async () => {
      const store =
        storeName === 'redis'
          ? { redis: testRedisUrl() }
          : storeName === 'postgres'
            ? { postgres: { connectionString: testPostgresUrl(), table, ensureSchema: true } }
            : {};
      if (storeName === 'postgres') await (await testPool()).end(); // fails naming PostgreSQL
      ({ app, url } = await start(platform, { ...store, keyPrefix: prefix, ttl }, events));
      records = app.get(IdempotencyRecords);
    });
    afterAll(async () => {
      await app.close();
      if (storeName === 'postgres') {
        const pool = await testPool();
        await dropTable(pool, table);
        await pool.end();
      }
      if (storeName !== 'redis') return;
      const client = inspectionClient();
      await deleteKeysUnder(client, prefix);
      await client.quit();
    });

    /** The route of the last `claimed` event: what an operator copies from the logs. */
    const lastRoute = () => events.filter((event) => event.type === 'claimed').at(-1)!.route;

    it('reports a completed record with its status, size and age, and deletes it', async () => {
      const key = randomUUID();
      const first = await post(url, '/payments', {
        key,
        body: { amount: 7 },
        headers: { 'x-user': 'ann' },
      });
      const route = lastRoute();
      expect(route).toBe('POST /payments');
      const state = await records.inspect({ key, route, user: { id: 'ann' } });
      expect(state).toEqual({
        state: 'completed',
        status: 201,
        error: false,
        bytes: first.bytes.length,
        ageMs: expect.any(Number),
        ttlMsLeft: expect.any(Number),
      });
      if (state.state !== 'completed') return;
      expect(state.ageMs).toBeGreaterThanOrEqual(0);
      expect(state.ageMs).toBeLessThan(60_000);
      expect(state.ttlMsLeft).toBeLessThanOrEqual(ttl);
      expect(state.ttlMsLeft).toBeGreaterThan(ttl - 60_000);
      // Records are scoped to the caller: another principal's is another record.
      expect(await records.inspect({ key, route, user: { id: 'bob' } })).toEqual({
        state: 'absent',
      });
      expect(await records.delete({ key, route, user: { id: 'ann' } })).toBe(true);
      expect(await records.inspect({ key, route, user: { id: 'ann' } })).toEqual({
        state: 'absent',
      });
      const before = runs.counts.get('create');
      const again = await post(url, '/payments', {
        key,
        body: { amount: 7 },
        headers: { 'x-user': 'ann' },
      });
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(runs.counts.get('create')).toBe(before! + 1);
    });

    it('frees a stuck key: a retry runs at once and the old holder is fenced', async () => {
      const key = randomUUID();
      const gate = deferred();
      const running = deferred();
      gates.push(gate.promise);
      started.push(running.resolve);
      const first = post(url, '/payments/slow', { key, headers: { 'x-user': 'ann' } });
      await running.promise;
      const route = lastRoute();
      const query = { key, route, user: { id: 'ann' } };
      const state = await records.inspect(query);
      expect(state).toMatchObject({ state: 'pending' });
      if (state.state === 'pending') expect(state.leaseMsLeft).toBeGreaterThan(50_000);
      expect(
        (await post(url, '/payments/slow', { key, headers: { 'x-user': 'ann' } })).status,
      ).toBe(409);
      expect(await records.delete(query)).toBe(true);
      gates.push(Promise.resolve());
      started.push(() => undefined);
      const retry = await post(url, '/payments/slow', { key, headers: { 'x-user': 'ann' } });
      expect(retry.status).toBe(201);
      gate.resolve();
      expect((await first).status).toBe(201);
      expect(
        events.filter((event) => event.type === 'fenced' && event.route === route),
      ).toHaveLength(1);
      // The retry's outcome is the stored one.
      const replay = await post(url, '/payments/slow', { key, headers: { 'x-user': 'ann' } });
      expect(replay.text).toBe(retry.text);
    });

    it('reports a stored error as such', async () => {
      const key = randomUUID();
      await post(url, '/payments/declined', { key, headers: { 'x-user': 'ann' } });
      const state = await records.inspect({ key, route: lastRoute(), user: { id: 'ann' } });
      expect(state).toMatchObject({ state: 'completed', status: 402, error: true });
    });

    it('answers absent and false for a key never used', async () => {
      const query = { key: randomUUID(), route: 'POST /payments', user: { id: 'ann' } };
      expect(await records.inspect(query)).toEqual({ state: 'absent' });
      expect(await records.delete(query)).toBe(false);
    });

    it('serves the recipe behind the app’s own guard, and only there', async () => {
      const key = randomUUID();
      await post(url, '/payments', { key, body: { amount: 1 }, headers: { 'x-user': 'cy' } });
      const query = { key, route: 'POST /payments', user: 'cy' };
      const denied = await fetch(`${url}/admin/idempotency?${new URLSearchParams(query)}`);
      expect(denied.status).toBe(403);
      expect(await call(url, 'GET', query)).toMatchObject({
        status: 200,
        body: { state: 'completed' },
      });
      expect(await call(url, 'DELETE', query)).toMatchObject({
        status: 200,
        body: { deleted: true },
      });
      expect(await call(url, 'GET', query)).toMatchObject({ body: { state: 'absent' } });
    });
  });
});

/**
 * IdempotencyRecords addresses a record "the way the interceptor does (key, route, owner)": a key
 * the ROUTE's maxKeyLength accepts (above the module's) is found, and what it throws for bad input
 * is an HttpException, so an operator endpoint that passes a typo through answers 400, not 500.
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
class KeyCheckingAdminController {
  constructor(private readonly records: IdempotencyRecords) {}

  @Get()
  inspect(@Query('key') key: string, @Query('route') route: string) {
    if (typeof key !== 'string' || typeof route !== 'string') throw new BadRequestException();
    return this.records.inspect({ key, route });
  }
}

describe.each(PLATFORMS)('IdempotencyRecords keys as routes check them, on %s', (platform) => {
  describe.each(STORES)('with the %s store', (storeName) => {
    const prefix = uniquePrefix('records-keys');
    const events: IdempotencyEvent[] = [];
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            ...storeOptions(storeName, prefix),
            onEvent: (event) => events.push(event),
          }),
        ],
        controllers: [ImportsController, KeyCheckingAdminController],
      })
      class AppModule {}
      ({ app, url } = await listen(platform, AppModule));
    });
    afterAll(async () => {
      await app?.close();
      if (storeName === 'redis') await cleanUpPrefix(prefix);
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
