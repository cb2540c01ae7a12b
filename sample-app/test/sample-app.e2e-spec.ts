import { ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import type Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import type { IdempotencyEventType } from 'nestjs-idempotency';
import { firstValueFrom } from 'rxjs';
import {
  deleteKeysUnder,
  inspectionClient,
  keysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../../test/support/redis';
import { RedisClusterProcesses, startRedisCluster } from '../../test/support/redis-server';
import { readConfig } from '../src/config';
import { formatReport, runDemo } from '../src/demo';
import { freePort, SampleApp, startSampleApp } from '../src/sample-app';
import { Stats, StatsService } from '../src/stats/stats.service';

const payment = { amount: 1250, currency: 'EUR' };

/** Boots the sample as `npm start` does, configured only by the given environment variables. */
async function boot(env: NodeJS.ProcessEnv): Promise<SampleApp> {
  const config = readConfig({ PORT: '0', TCP_PORT: String(await freePort()), ...env });
  return startSampleApp(config, { logger: false });
}

async function request(
  url: string,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  options: { key?: string; body?: unknown } = {},
) {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (options.key !== undefined) headers['Idempotency-Key'] = options.key;
  const res = await fetch(`${url}${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await res.text(); // empty for a 204
  return {
    status: res.status,
    headers: res.headers,
    body: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
  };
}

describe.each(['memory', 'redis'] as const)('the sample app on the %s store', (store) => {
  const prefix = uniquePrefix(`sample-app-${store}`);
  let sample: SampleApp;
  let client: ClientProxy;
  let redis: Redis | undefined;
  const key = () => `sample-${randomUUID()}`;
  const get = (path: string) => request(sample.url, 'GET', path);
  const post = (path: string, options: { key?: string; body?: unknown }) =>
    request(sample.url, 'POST', path, options);
  const stats = async () => (await get('/stats')).body as unknown as Stats;
  const runs = async (handler: string) => (await stats()).executions[handler] ?? 0;

  /** Resolves when `handler`'s body next starts (the app's StatsService hears it first). */
  function nextRun(handler: string): Promise<void> {
    const service = sample.app.get(StatsService);
    return new Promise((resolve) => {
      const spy = jest.spyOn(service, 'executed').mockImplementation((name) => {
        StatsService.prototype.executed.call(service, name);
        if (name !== handler) return;
        spy.mockRestore();
        resolve();
      });
    });
  }

  /** Resolves when the module next reports `type` for `handler` (through onEvent). */
  function nextOutcome(handler: string, type: IdempotencyEventType): Promise<void> {
    const service = sample.app.get(StatsService);
    return new Promise((resolve) => {
      const spy = jest.spyOn(service, 'outcome').mockImplementation((event) => {
        StatsService.prototype.outcome.call(service, event);
        if (event.handler !== handler || event.type !== type) return;
        spy.mockRestore();
        resolve();
      });
    });
  }

  beforeAll(async () => {
    sample = await boot({
      REDIS_URL: store === 'redis' ? testRedisUrl() : undefined,
      IDEMPOTENCY_KEY_PREFIX: prefix,
    });
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: sample.tcp });
    await client.connect();
    if (store === 'redis') redis = inspectionClient();
  });

  afterAll(async () => {
    await client?.close();
    await sample?.close();
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
  });

  it('says where it listens and which store it uses', async () => {
    const { body } = await get('/');
    expect(body.tcp).toEqual(sample.tcp);
    expect(body.store).toMatch(store === 'redis' ? /^Redis at redis:/ : /in-memory/);
  });

  it('creates a payment once: 201 with Location, then the same 201 replayed', async () => {
    const k = key();
    const before = await runs('PaymentsController.create');
    const first = await post('/payments', { key: k, body: payment });
    expect(first.status).toBe(201);
    expect(first.headers.get('location')).toBe(`/payments/${first.body.id}`);
    expect(first.headers.get('idempotent-replayed')).toBeNull();

    const retry = await post('/payments', { key: k, body: payment });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('location')).toBe(first.headers.get('location'));
    expect(retry.body).toEqual(first.body);
    expect(await runs('PaymentsController.create')).toBe(before + 1);

    const found = await get(first.headers.get('location')!);
    expect(found).toMatchObject({ status: 200, body: { ...payment, status: 'captured' } });
    expect((await get(`/payments/${randomUUID()}`)).status).toBe(404);
    if (redis) expect((await keysUnder(redis, prefix)).length).toBeGreaterThan(0);
  });

  it('requires a key on payments and rejects another payload under a used key', async () => {
    const missing = await post('/payments', { body: payment });
    expect(missing).toMatchObject({ status: 400, body: { code: 'IDEMPOTENCY_KEY_MISSING' } });

    const k = key();
    expect((await post('/payments', { key: k, body: payment })).status).toBe(201);
    const other = await post('/payments', { key: k, body: { ...payment, amount: 1 } });
    expect(other).toMatchObject({ status: 422, body: { code: 'IDEMPOTENCY_KEY_REUSED' } });
  });

  it('frees the key after a validation 400, so the corrected retry runs', async () => {
    const k = key();
    const before = await runs('PaymentsController.create');
    const invalid = await post('/payments', { key: k, body: { amount: -5, currency: 'XXX' } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.message).toEqual(
      expect.arrayContaining(['amount must be a positive number']),
    );
    expect((await post('/payments', { key: k, body: payment })).status).toBe(201);
    expect(await runs('PaymentsController.create')).toBe(before + 1);
  });

  it('places an order once per key; without a key every request runs', async () => {
    const order = { sku: 'mug', quantity: 2 };
    const before = await runs('OrdersController.create');
    const k = key();
    const first = await post('/orders', { key: k, body: order });
    const retry = await post('/orders', { key: k, body: order });
    expect(first).toMatchObject({ status: 201, body: { ...order, status: 'placed' } });
    expect(retry.body).toEqual(first.body);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    await post('/orders', { body: order });
    await post('/orders', { body: order });
    expect(await runs('OrdersController.create')).toBe(before + 3);
    expect((await get(`/orders/${first.body.id}`)).body).toEqual(first.body);
  });

  it('answers 409 with Retry-After to duplicates while the slow report runs', async () => {
    const k = key();
    const body = { period: 'daily' };
    const started = nextRun('ReportsController.create');
    const first = post('/reports', { key: k, body });
    await started;
    const duplicates = await Promise.all([1, 2, 3].map(() => post('/reports', { key: k, body })));
    for (const duplicate of duplicates) {
      expect(duplicate).toMatchObject({ status: 409, body: { code: 'IDEMPOTENCY_IN_PROGRESS' } });
      expect(Number(duplicate.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    const done = await first;
    expect(done).toMatchObject({ status: 201, body: { period: 'daily' } });
    const retry = await post('/reports', { key: k, body });
    expect(retry).toMatchObject({ status: 201, body: done.body });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });

  it('refunds once when the TCP message payments.refund is redelivered', async () => {
    const created = await post('/payments', { key: key(), body: payment });
    const command = { paymentId: created.body.id, amount: 250, idempotencyKey: key() };
    const before = await runs('PaymentsConsumer.refund');
    const first = await firstValueFrom(client.send('payments.refund', command));
    const again = await firstValueFrom(client.send('payments.refund', command));
    expect(first).toMatchObject({ paymentId: created.body.id, amount: 250 });
    expect(again).toEqual(first);
    expect(await runs('PaymentsConsumer.refund')).toBe(before + 1);
    expect((await get(`/payments/${created.body.id}`)).body.refunded).toBe(250);

    const unkeyed = { paymentId: command.paymentId, amount: command.amount };
    await expect(firstValueFrom(client.send('payments.refund', unkeyed))).rejects.toMatchObject({
      code: 'IDEMPOTENCY_KEY_MISSING',
    });
    await expect(
      firstValueFrom(client.send('payments.refund', { ...command, amount: 1 })),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
  });

  it('skips a redelivered order.shipped event', async () => {
    const order = await post('/orders', { key: key(), body: { sku: 'tea', quantity: 1 } });
    const event = { eventId: key(), orderId: order.body.id };
    const before = await runs('OrdersConsumer.onShipped');

    const completed = nextOutcome('OrdersConsumer.onShipped', 'completed');
    await firstValueFrom(client.emit('order.shipped', event), { defaultValue: undefined });
    await completed;
    const replayed = nextOutcome('OrdersConsumer.onShipped', 'replayed');
    await firstValueFrom(client.emit('order.shipped', event), { defaultValue: undefined });
    await replayed;

    expect(await runs('OrdersConsumer.onShipped')).toBe(before + 1);
    const shipped = await get(`/orders/${order.body.id}`);
    expect(shipped.body).toMatchObject({ status: 'shipped', shipments: 1 });
  });

  it('serves the operator page to the operator only: 401 and a login prompt otherwise', async () => {
    const page = `${sample.url}/ops/idempotency`;
    const basic = (login: string) => `Basic ${Buffer.from(login).toString('base64')}`;
    const refusals: Record<string, string>[] = [{}, { Authorization: basic('operator:wrong') }];
    for (const headers of refusals) {
      const refused = await fetch(page, { headers });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Basic realm="operators"');
    }
    const shown = await fetch(page, { headers: { Authorization: basic('operator:demo') } });
    expect(shown.status).toBe(200);
    expect(shown.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await shown.text()).toContain('Idempotency records');
  });

  it('resumes a checkout that failed at its third step: steps 1 and 2 run once', async () => {
    const k = key();
    const checkout = { sku: 'mug', quantity: 1, email: 'ada@example.com' };
    const ran = async () => (await stats()).executions;
    const before = await ran();
    expect((await request(sample.url, 'PUT', '/mailer/outage')).status).toBe(204);
    const failed = await post('/checkouts', { key: k, body: checkout });
    expect((await request(sample.url, 'DELETE', '/mailer/outage')).status).toBe(204);
    expect(failed.status).toBe(503);
    const done = await post('/checkouts', { key: k, body: checkout });
    expect(done.status).toBe(201);
    const after = await ran();
    const runs = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
    expect(
      ['step: reserve stock', 'step: charge payment', 'step: send confirmation'].map(runs),
    ).toEqual([1, 1, 2]);
    const replay = await post('/checkouts', { key: k, body: checkout });
    expect(replay.body).toEqual(done.body);
  });

  it('runs the demo: every duplicate is answered, every handler runs once', async () => {
    const report = await runDemo(sample.url);
    const scenario = (name: string) => report.scenarios.find((s) => s.name === name)!;
    expect(report.tcp).toEqual(sample.tcp);

    const burst = scenario('burst');
    expect(burst.executions).toBe(1);
    // The first request wins; the rest are 409 while it runs, replayed 201s once it is done.
    expect(Object.keys(burst.statuses).every((s) => s === '201' || s === '409')).toBe(true);
    expect((burst.statuses['201'] ?? 0) + (burst.statuses['409'] ?? 0)).toBe(20);
    expect(burst.statuses['201']).toBeGreaterThanOrEqual(1);
    expect(burst.outcomes).toMatchObject({ claimed: 1, completed: 1 });

    const retry = scenario('retry');
    expect(retry).toMatchObject({ statuses: { 201: 1 }, executions: 0 });
    expect(retry.headers['idempotent-replayed: true']).toBe(1);
    const location = Object.keys(retry.headers).find((h) => h.startsWith('location: /payments/'));
    expect(location).toBeDefined();

    expect(scenario('mismatch')).toMatchObject({ statuses: { 422: 1 }, executions: 0 });
    expect(scenario('validation')).toMatchObject({
      statuses: { 400: 1, 201: 1 },
      executions: 1,
      outcomes: { claimed: 2, released: 1, completed: 1 },
    });
    const inProgress = scenario('in-progress');
    expect(inProgress).toMatchObject({ statuses: { 201: 1, 409: 4 }, executions: 1 });
    expect(Object.keys(inProgress.headers).some((h) => h.startsWith('retry-after: '))).toBe(true);
    const wait = scenario('wait');
    expect(wait).toMatchObject({
      statuses: { 201: 5 },
      executions: 1,
      outcomes: { waiting: 4, replayed: 4 },
    });
    expect(wait.headers['idempotent-replayed: true']).toBe(4);
    expect(scenario('tcp-message')).toMatchObject({
      statuses: { reply: 2 },
      executions: 1,
      outcomes: { replayed: 1 },
    });
    expect(scenario('tcp-event')).toMatchObject({
      statuses: { emitted: 2 },
      executions: 1,
      outcomes: { replayed: 1 },
    });

    expect(scenario('graphql')).toMatchObject({
      statuses: { data: 2, 'identical responses': 1, 'error IDEMPOTENCY_KEY_MISSING': 1 },
      executions: 1,
      outcomes: { claimed: 1, completed: 1, replayed: 1 },
    });

    // Failed at its third step, listed as half done, resumed by its retry: steps 1-2 ran once.
    expect(scenario('resumable')).toMatchObject({
      statuses: { 503: 1, 201: 1 },
      executions: 2,
      steps: { 'reserve stock': 1, 'charge payment': 1, 'send confirmation': 2 },
      notes: ['listed as half done on the operator page'],
    });
    expect(report.operatorPage).toBe(`${sample.url}/ops/idempotency`);

    const text = formatReport(report);
    expect(text).toContain('1. burst: 20 concurrent duplicates of POST /payments');
    expect(text).toContain('PaymentsController.create ran 1×');
    expect(text).toContain('steps:    reserve stock ×1, charge payment ×1, send confirmation ×2');
    expect(text).toContain(`Operator page: ${sample.url}/ops/idempotency`);
  });
});

describe('the sample app on a Redis Cluster (REDIS_CLUSTER_NODES)', () => {
  let cluster: RedisClusterProcesses;
  let sample: SampleApp;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    const nodes = cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
    sample = await boot({ REDIS_CLUSTER_NODES: nodes });
  }, 60_000);

  afterAll(async () => {
    await sample?.close();
    await cluster?.stop();
  });

  it('creates a payment once and replays it', async () => {
    const info = await request(sample.url, 'GET', '/');
    expect(info.body.store).toMatch(/^Redis Cluster at /);
    const k = `cluster-${randomUUID()}`;
    const first = await request(sample.url, 'POST', '/payments', { key: k, body: payment });
    const retry = await request(sample.url, 'POST', '/payments', { key: k, body: payment });
    expect(first.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);
  });
});
