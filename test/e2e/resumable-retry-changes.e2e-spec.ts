import { Body, Controller, HttpException, INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyRecords,
  IdempotencyService,
  Idempotent,
} from '../../lib';
import { World } from '../support/resumable';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';

/**
 * What may change between a resumable request's failure and its retry, over HTTP on the Redis
 * store: the payload, the app's encryption keys (a deploy between the two), an operator deleting
 * the record while the request runs, a duplicate waiting for it; and what
 * IdempotencyRecords.inspect() shows meanwhile. docs/steps.md says what each must do.
 */
const ROUTE = 'POST /orders';

class Declined extends HttpException {
  constructor() {
    super('card declined', 402);
  }
}

@Controller('orders')
class OrdersController {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly world: World,
  ) {}

  @Post()
  @Idempotent({ resumable: true, scope: 'public', storeErrors: [Declined] })
  async create(@Body() body: { item: string; decline?: boolean }) {
    const { idempotency, world } = this;
    const order = await idempotency.step('order', async () => {
      await world.enter('order');
      return world.insertOrder(body.item);
    });
    await idempotency.step('charge', async () => {
      await world.enter('charge');
      if (body.decline) throw new Declined();
      world.effect('charge');
    });
    await idempotency.step('email', async () => {
      await world.enter('email');
      world.effect('email');
    });
    return { order: order.id };
  }

  /** The same steps; a duplicate waits for the request holding the key. */
  @Post('wait')
  @Idempotent({ resumable: true, scope: 'public', onConflict: 'wait' })
  createWaiting(@Body() body: { item: string }) {
    return this.create(body);
  }
}

const prefix = uniquePrefix('resumable-retry-changes');
const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const world = new World();
const apps: INestApplication[] = [];

/** An app on the shared Redis prefix (a replica, or the app after a deploy). */
async function start(options: IdempotencyModuleOptions = {}) {
  @Module({
    imports: [IdempotencyModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix, ...options })],
    controllers: [OrdersController],
    providers: [{ provide: World, useValue: world }],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  apps.push(app);
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const order = (key: string, body: object = { item: 'book' }) =>
    post(url, '/orders', { key, body });
  const waiting = (key: string) => post(url, '/orders/wait', { key, body: { item: 'book' } });
  return { app, order, waiting, records: app.get(IdempotencyRecords) };
}

afterAll(async () => {
  for (const app of apps) await app.close();
  await cleanUpPrefix(prefix);
});
beforeEach(() => {
  world.attempts.clear();
  world.effects.clear();
});

const runs = (step: string) => world.count('attempts', step);

describe('a resumable request retried after something changed', () => {
  it('another payload under the key gets 422 and resumes nothing; the first payload still resumes', async () => {
    const { order } = await start();
    const key = randomUUID();
    world.failNext('email');
    expect((await order(key)).status).toBe(502);
    const other = await order(key, { item: 'lamp' });
    expect(other.status).toBe(422);
    expect([runs('order'), runs('charge'), runs('email')]).toEqual([1, 1, 1]);
    expect((await order(key)).status).toBe(201);
    expect([runs('order'), runs('charge'), runs('email')]).toEqual([1, 1, 2]);
  });

  it('shows the recorded steps of a failed request, and of a running one, to operators', async () => {
    const { order, records } = await start();
    const key = randomUUID();
    world.failNext('email');
    await order(key);
    await expect(records.inspect({ key, route: ROUTE })).resolves.toEqual({
      state: 'absent',
      steps: [
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ],
    });
    const held = world.hold('email');
    const running = order(key);
    await held.reached;
    const pending = await records.inspect({ key, route: ROUTE });
    held.release();
    expect(pending).toMatchObject({
      state: 'pending',
      steps: [
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ],
    });
    expect((await running).status).toBe(201);
    await expect(records.inspect({ key, route: ROUTE })).resolves.toMatchObject({
      state: 'completed',
      status: 201,
    });
  });

  it('resumes after a deploy that rotated the encryption key (prepended), and refuses with 500 once the old key is gone, running nothing', async () => {
    const before = await start({ encryption: { keys: [oldKey] } });
    const key = randomUUID();
    world.failNext('email');
    expect((await before.order(key)).status).toBe(502);
    const rotated = await start({ encryption: { keys: [newKey, oldKey] } });
    world.failNext('email');
    expect((await rotated.order(key)).status).toBe(502);
    expect([runs('order'), runs('charge')]).toEqual([1, 1]);
    const dropped = await start({ encryption: { keys: [newKey] } });
    const refused = await dropped.order(key);
    expect(refused.status).toBe(500);
    expect(refused.json()).toMatchObject({ code: 'IDEMPOTENCY_RECORD_UNREADABLE' });
    expect([runs('order'), runs('charge'), runs('email')]).toEqual([1, 1, 2]);
  });

  it('an operator deletes the record while it runs: the run is fenced (409), and the retry starts over', async () => {
    const { order, records } = await start();
    const key = randomUUID();
    const held = world.hold('email');
    const running = order(key);
    await held.reached;
    await expect(records.delete({ key, route: ROUTE })).resolves.toBe(true);
    held.release();
    const fenced = await running;
    expect(fenced.status).toBe(409);
    // docs/steps.md: after a delete, the effects of the recorded steps happen again.
    expect((await order(key)).status).toBe(201);
    expect([runs('order'), runs('charge'), runs('email')]).toEqual([2, 2, 2]);
    expect(world.count('effects', 'email')).toBe(2);
  });

  it('stores a listed error a step threw (storeErrors), and replays it without running a step', async () => {
    const { order, records } = await start();
    const key = randomUUID();
    const declined = await order(key, { item: 'book', decline: true });
    expect(declined.status).toBe(402);
    const replayed = await order(key, { item: 'book', decline: true });
    expect(replayed.status).toBe(402);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect([runs('order'), runs('charge'), runs('email')]).toEqual([1, 1, 0]);
    await expect(records.inspect({ key, route: ROUTE })).resolves.toMatchObject({
      state: 'completed',
      error: true,
    });
  });

  it('a duplicate waiting (onConflict: wait) for a request that fails in a step resumes after its recorded steps', async () => {
    let waits!: () => void;
    const waitingNow = new Promise<void>((resolve) => (waits = resolve));
    const { waiting } = await start({
      onEvent: (event) => event.type === 'waiting' && waits(),
    });
    const key = randomUUID();
    const held = world.hold('email');
    const first = waiting(key);
    await held.reached;
    const duplicate = waiting(key);
    await waitingNow;
    // The duplicate waits for the first, which now fails in its third step.
    world.failNext('email');
    held.release();
    expect((await first).status).toBe(502);
    expect((await duplicate).status).toBe(201);
    expect([runs('order'), runs('charge'), runs('email')]).toEqual([1, 1, 2]);
  });
});
