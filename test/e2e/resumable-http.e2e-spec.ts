import { Body, Controller, INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  deriveKey,
  derivedIdempotencyKey,
  IdempotencyEvent,
  IdempotencyModule,
  IdempotencyRecords,
  IdempotencyService,
  IdempotencyStepMismatchError,
  Idempotent,
} from '../../lib';
import { CountingStore, ORDER_STEPS, World } from '../support/resumable';
import { PLATFORMS, post, type Platform } from '../support/test-app';

const SECRET = 'resumable-http-e2e-secret-0123456789abcdef';

/** A downstream API that keeps the Idempotency-Key of every request it gets. */
const downstream = { server: undefined as Server | undefined, url: '', keys: [] as string[] };

@Controller()
class OrdersController {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly world: World,
  ) {}

  /** The four steps: an order row, a charge, an e-mail, an event. */
  @Post('orders')
  @Idempotent({ resumable: true, scope: 'public' })
  async create(@Body() body: { item: string }) {
    const { idempotency: steps, world } = this;
    const derive = () => derivedIdempotencyKey('same label');
    const order = await steps.step('order', async () => {
      await world.enter('order', derive);
      return world.insertOrder(body.item);
    });
    const charge = await steps.step('charge', async () => {
      await world.enter('charge', derive);
      return world.charge(derivedIdempotencyKey('charge'));
    });
    await steps.step('email', async () => {
      await world.enter('email', derive);
      world.effect('email');
    });
    await steps.step('event', async () => {
      await world.enter('event', derive);
      world.effect('event');
    });
    return { order, charge: charge.id, amount: String(charge.amount), outside: derive() };
  }

  /** Steps named by the test: the code of the handler, as it changes between deploys. */
  @Post('versioned')
  @Idempotent({ resumable: true, scope: 'public' })
  async versioned() {
    for (const name of this.world.names) {
      await this.idempotency.step(name, () => this.world.enter(name).then(() => name));
    }
    return { ran: this.world.names };
  }

  /** Two steps whose outbound calls carry propagated keys. */
  @Post('propagating')
  @Idempotent({ resumable: true, scope: 'public', propagateKeys: true })
  async propagating() {
    const call = () => fetch(`${downstream.url}/charges`, { method: 'POST', body: '{}' });
    await this.idempotency.step('twice', async () => {
      await this.world.enter('twice');
      await call();
      await call();
    });
    await this.idempotency.step('once', async () => {
      await this.world.enter('once');
      await call();
    });
    return {};
  }

  /** Not resumable: what every route was before. */
  @Post('plain')
  @Idempotent({ scope: 'public' })
  async plain() {
    await this.world.enter('plain');
    return { plain: true };
  }
}

describe.each(PLATFORMS)('resumable handlers over HTTP (%s)', (platform: Platform) => {
  let now = 1_000_000;
  const store = new CountingStore({ now: () => now, sweepIntervalMs: 0 });
  const world = new World();
  const events: IdempotencyEvent[] = [];
  let app: INestApplication;
  let url: string;
  let records: IdempotencyRecords;

  beforeAll(async () => {
    downstream.server = createServer((request, response) => {
      downstream.keys.push(String(request.headers['idempotency-key']));
      request.resume();
      request.on('end', () => response.end('{}'));
    });
    downstream.server.listen(0, '127.0.0.1');
    await once(downstream.server, 'listening');
    downstream.url = `http://127.0.0.1:${(downstream.server.address() as AddressInfo).port}`;
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          store,
          keyDerivationSecret: SECRET,
          onEvent: (event) => events.push(event),
        }),
      ],
      controllers: [OrdersController],
      providers: [{ provide: World, useValue: world }],
    })
    class AppModule {}
    app =
      platform === 'fastify'
        ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })
        : await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    records = app.get(IdempotencyRecords);
  });
  afterAll(async () => {
    await app?.close();
    await store.close();
    downstream.server?.close();
  });
  beforeEach(() => {
    world.attempts.clear();
    world.effects.clear();
    world.derived.length = 0;
    world.chargeKeys.length = 0;
    store.take();
  });

  const order = (key: string) => post(url, '/orders', { key, body: { item: 'book' } });
  const attempts = () => ORDER_STEPS.map((step) => world.count('attempts', step));
  const effects = () => ORDER_STEPS.map((step) => world.count('effects', step));

  it.each(ORDER_STEPS.map((step, index) => [step, index] as const))(
    'resumes after a failure in step %s: the steps before it do not run again, and the response is the completed one',
    async (failing, at) => {
      const key = randomUUID();
      world.failNext(failing);
      expect((await order(key)).status).toBe(502);
      // What the failed run recorded stays for the retry.
      const stuck = await records.inspect({ key, route: 'POST /orders' });
      expect(stuck).toEqual(
        at === 0
          ? { state: 'absent' }
          : {
              state: 'absent',
              steps: ORDER_STEPS.slice(0, at).map((name, i) => ({ index: i, name })),
            },
      );
      const done = await order(key);
      expect(done.status).toBe(201);
      // Each step ran once, but the failing one, which ran (and failed) once before.
      expect(attempts()).toEqual(ORDER_STEPS.map((_, i) => (i === at ? 2 : 1)));
      expect(effects()).toEqual([1, 1, 1, 1]);
      // The order of the first run, as it recorded it (a Date inside), and one charge.
      const body = done.json() as { order: { id: string; placedAt: string }; charge: string };
      expect(body.order).toEqual({
        id: expect.stringMatching(/^order-\d+$/),
        item: 'book',
        placedAt: expect.stringMatching(/^2026-11-26T09:/),
      });
      expect(new Set(world.chargeKeys).size).toBe(1);
      // Completed: a retry replays it, and runs nothing.
      const replay = await order(key);
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json()).toEqual(body);
      expect(attempts()).toEqual(ORDER_STEPS.map((_, i) => (i === at ? 2 : 1)));
      expect(await records.inspect({ key, route: 'POST /orders' })).toMatchObject({
        state: 'completed',
        status: 201,
      });
    },
  );

  it('costs one store call per step run, none per step resumed, and clears the steps with the completion', async () => {
    const key = randomUUID();
    world.failNext('email');
    await order(key);
    expect(store.take().map((call) => call.op)).toEqual([
      'claim',
      'recordStep',
      'recordStep',
      'release',
    ]);
    expect((await order(key)).status).toBe(201);
    const calls = store.take();
    expect(calls.map((call) => call.op)).toEqual(['claim', 'recordStep', 'recordStep', 'complete']);
    expect(calls[0]).toMatchObject({ op: 'claim', request: { resumable: true } });
    expect(calls[3]).toEqual({ op: 'complete', args: 5, options: { clearSteps: true } });
  });

  it('costs a route without resumable nothing new: no resumable claim, no step, a completion as before', async () => {
    const response = await post(url, '/plain', { key: randomUUID() });
    expect(response.status).toBe(201);
    expect(store.take()).toEqual([
      { op: 'claim', resumable: false, request: expect.not.objectContaining({ resumable: true }) },
      { op: 'complete', args: 4 },
    ]);
  });

  it('derives keys from the step inside it: stable across re-runs, different between steps and from the handler', async () => {
    const key = randomUUID();
    world.failNext('email');
    await order(key);
    const first = [...world.derived];
    world.derived.length = 0;
    const done = (await order(key)).json() as { outside: string };
    const second = [...world.derived];
    // The first run derived in order, charge and email (which failed); the retry in email and event.
    expect(first.map((d) => d.step)).toEqual(['order', 'charge', 'email']);
    expect(second.map((d) => d.step)).toEqual(['email', 'event']);
    expect(second[0].key).toBe(first[2].key);
    const keys = [...first.map((d) => d.key), second[1].key, done.outside];
    expect(new Set(keys).size).toBe(5);
  });

  it('sends propagated keys numbered per step, derived from the step, the same when the step runs again', async () => {
    const key = randomUUID();
    downstream.keys.length = 0;
    world.failNext('once');
    const claimed = events.length;
    expect((await post(url, '/propagating', { key })).status).toBe(502);
    const recordKey = events.slice(claimed).find((event) => event.type === 'claimed')!.key!;
    expect((await post(url, '/propagating', { key })).status).toBe(201);
    const label = `POST ${downstream.url}/charges`;
    const step = (index: number, name: string) => `${recordKey}\0step\0${index}\0${name}`;
    const [first, second, once] = [
      deriveKey(SECRET, step(0, 'twice'), label),
      deriveKey(SECRET, step(0, 'twice'), `${label} #2`),
      deriveKey(SECRET, step(1, 'once'), label),
    ];
    // The failed run made the first step's two calls (its step 'once' failed before calling);
    // the retry resumed after the first step and made the second's call.
    expect(downstream.keys).toEqual([first, second, once]);
  });

  it('fails loudly, naming both steps, when the code changed between a failure and the retry', async () => {
    const key = randomUUID();
    world.names = ['order', 'charge', 'email'];
    world.failNext('email');
    expect((await post(url, '/versioned', { key })).status).toBe(502);
    world.names = ['order', 'payment', 'email'];
    const released = events.length;
    expect((await post(url, '/versioned', { key })).status).toBe(500);
    expect(world.count('attempts', 'payment')).toBe(0);
    const failure = events.slice(released).find((event) => event.type === 'released')?.error;
    expect(failure).toBeInstanceOf(IdempotencyStepMismatchError);
    expect(String((failure as Error).message)).toMatch(
      /step 1 was recorded as "charge".*"payment"/s,
    );
    // Every retry fails the same way, until an operator deletes the record and its steps.
    expect((await post(url, '/versioned', { key })).status).toBe(500);
    expect(await records.delete({ key, route: 'POST /versioned' })).toBe(true);
    const fresh = await post(url, '/versioned', { key });
    expect(fresh.status).toBe(201);
    expect(world.count('attempts', 'order')).toBe(2);
  });

  it('fences a zombie: a run whose lease was taken over records no step, and its client gets 409', async () => {
    const key = randomUUID();
    const held = world.hold('charge');
    const zombie = order(key);
    await held.reached;
    expect(await records.inspect({ key, route: 'POST /orders' })).toMatchObject({
      state: 'pending',
      steps: [{ index: 0, name: 'order' }],
    });
    now += 31_000; // past the lease (lockTtl 30 s): as after a stall, another run takes over
    const heir = await order(key);
    expect(heir.status).toBe(201);
    held.release();
    const late = await zombie;
    expect(late.status).toBe(409);
    expect(late.json()).toMatchObject({ code: 'IDEMPOTENCY_IN_PROGRESS' });
    // The heir resumed after the order; the zombie's charge reached the provider with the
    // heir's key (one charge), and it sent no e-mail and no event.
    expect(attempts()).toEqual([1, 2, 1, 1]);
    expect(effects()).toEqual([1, 1, 1, 1]);
    expect(world.chargeKeys).toHaveLength(2);
    expect(new Set(world.chargeKeys).size).toBe(1);
    expect((await order(key)).json()).toEqual(heir.json());
  });
});
