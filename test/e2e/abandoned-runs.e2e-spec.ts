import {
  Body,
  type CanActivate,
  ConsoleLogger,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  Post,
  UseGuards,
} from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { randomUUID } from 'node:crypto';
import {
  type IdempotencyEvent,
  IdempotencyModule,
  IdempotencyRecords,
  IdempotencyService,
  Idempotent,
  MemoryIdempotencyStore,
} from '../../lib';
import { METER_NAME, RECORDS_METRIC } from '../../lib/observability/metrics';
import { listen } from '../support/http-app';
import { World } from '../support/resumable';
import { PLATFORMS, post } from '../support/test-app';

/** Short, so that the tests hear a run abandoned within a second. */
const ABANDONED_AFTER = 300;
const ENCRYPTION_KEY = 'Zk3vQ9rT1xLw8pNc2yHs6bJd4mFa7gEu';

/** The caller, from a header: what a login sets as `request.user`. */
@Injectable()
class HeaderUser implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
    const name = request.headers['x-user'];
    if (name) Object.assign(request, { user: { id: name } });
    return true;
  }
}

@Controller()
@UseGuards(HeaderUser)
class OrdersController {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly world: World,
  ) {}

  /** The four steps, scoped to the caller. */
  @Post('orders')
  @Idempotent({ resumable: true })
  async create(@Body() body: { item: string }) {
    const { idempotency, world } = this;
    const order = await idempotency.step('order', async () => {
      await world.enter('order');
      return world.insertOrder(body.item);
    });
    await idempotency.step('charge', async () => {
      await world.enter('charge');
      world.effect('charge');
    });
    await idempotency.step('email', async () => {
      await world.enter('email');
      world.effect('email');
    });
    await idempotency.step('event', async () => {
      await world.enter('event');
      world.effect('event');
    });
    return { order: order.id };
  }
}

/** Nest's log, kept: the warnings of the `Idempotency` context. */
class KeptLog extends ConsoleLogger {
  readonly warnings: string[] = [];

  override warn(message: unknown, context?: string): void {
    if (context === 'Idempotency') this.warnings.push(String(message));
  }
  override log(): void {}
  override error(): void {}
}

/** The global MeterProvider of the test, read on demand. */
class TestMeter {
  private readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  private readonly reader = new PeriodicExportingMetricReader({
    exporter: this.exporter,
    exportIntervalMillis: 3_600_000,
  });
  private readonly provider = new MeterProvider({ readers: [this.reader] });

  constructor() {
    metrics.disable();
    metrics.setGlobalMeterProvider(this.provider);
  }

  /** The record gauges as collected now: `{ running: 0, stuck: 0, half_done: 1, ... }`. */
  async records(): Promise<Record<string, number>> {
    await this.reader.forceFlush();
    const scope = this.exporter
      .getMetrics()
      .at(-1)
      ?.scopeMetrics.find((s) => s.scope.name === METER_NAME);
    const metric = scope?.metrics.find((m) => m.descriptor.name === RECORDS_METRIC);
    const counts: Record<string, number> = {};
    for (const point of (metric?.dataPoints ?? []) as DataPoint<number>[]) {
      counts[String(point.attributes['idempotency.record.state'])] = point.value;
    }
    return counts;
  }

  async shutdown(): Promise<void> {
    metrics.disable();
    await this.provider.shutdown();
  }
}

/** Resolves once `check` holds, looking every 20 ms (the reporter looks every 250 ms). */
async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(PLATFORMS)('abandoned runs on the memory store, one process (%s)', (platform) => {
  const world = new World();
  const events: IdempotencyEvent[] = [];
  const log = new KeptLog();
  let meter: TestMeter;
  let store: MemoryIdempotencyStore;
  let app: Awaited<ReturnType<typeof listen>>['app'];
  let url: string;
  let records: IdempotencyRecords;
  let service: IdempotencyService;

  beforeAll(async () => {
    meter = new TestMeter();
    store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          store,
          abandonedAfter: ABANDONED_AFTER,
          encryption: { keys: [ENCRYPTION_KEY] },
          onEvent: (event) => events.push(event),
        }),
      ],
      controllers: [OrdersController],
      providers: [{ provide: World, useValue: world }],
    })
    class AppModule {}
    ({ app, url } = await listen(platform, AppModule, undefined, { logger: log }));
    records = app.get(IdempotencyRecords);
    service = app.get(IdempotencyService);
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
    await meter?.shutdown();
  });

  const abandoned = () => events.filter((event) => event.type === 'abandoned');
  const order = (key: string) =>
    post(url, '/orders', { key, body: { item: 'book' }, headers: { 'x-user': 'ann' } });

  it('lists a run whose third step threw as half done, hears it abandoned once, and a retry resumes it', async () => {
    const key = `order-${randomUUID()}`;
    world.failNext('email');
    expect((await order(key)).status).toBe(502);

    const { items } = await records.list({ state: 'half_done', route: 'POST /orders' });
    const item = items.find((listed) => listed.key === key)!;
    expect(item).toMatchObject({
      key,
      route: 'POST /orders',
      user: { id: 'ann' },
      state: 'half_done',
      steps: [
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ],
      reported: false,
    });
    expect(await records.inspect(item)).toMatchObject({ state: 'absent', steps: item.steps });
    expect((await meter.records()).half_done).toBe(1);

    await until(() => abandoned().length > 0, 'the abandoned event');
    // Several more looks: none reports it again.
    const looked = (await records.list({ state: 'half_done' })).items;
    expect(looked.find((listed) => listed.ref === item.ref)?.reported).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 3 * ABANDONED_AFTER));
    expect(abandoned()).toEqual([
      {
        type: 'abandoned',
        handler: 'POST /orders',
        route: 'POST /orders',
        key: item.ref,
        error: undefined,
        record: { ...item, reported: true, ageMs: expect.any(Number) },
      },
    ]);
    expect(log.warnings.filter((line) => line.startsWith('abandoned: '))).toEqual([
      expect.stringMatching(
        new RegExp(
          `^abandoned: POST /orders, key "${key}", user "ann", steps done: order, charge; ` +
            'half done for [0-9.]+ min',
        ),
      ),
    ]);

    // The retry with the same key and payload resumes: order and charge do not run again.
    const attempts = world.count('attempts', 'order');
    const resumed = await order(key);
    expect(resumed.status).toBe(201);
    expect(world.count('attempts', 'order')).toBe(attempts);
    expect((await records.list({ state: 'half_done' })).items).toEqual([]);
    const completed = (await records.list({ state: 'completed' })).items;
    expect(completed).toEqual([
      expect.objectContaining({ key, user: { id: 'ann' }, status: 201, error: false }),
    ]);
    expect(await meter.records()).toEqual({ running: 0, stuck: 0, half_done: 0, completed: 1 });
  });

  it('hears a run again when its retry fails again: a new claim clears the mark', async () => {
    const key = `again-${randomUUID()}`;
    world.failNext('email');
    await order(key);
    await until(() => abandoned().some((event) => event.record?.key === key), 'a first report');
    world.failNext('event');
    expect((await order(key)).status).toBe(502);
    await until(
      () => abandoned().filter((event) => event.record?.key === key).length === 2,
      'a second report',
    );
    const [first, second] = abandoned().filter((event) => event.record?.key === key);
    expect(first.record?.steps?.map((step) => step.name)).toEqual(['order', 'charge']);
    expect(second.record?.steps?.map((step) => step.name)).toEqual(['order', 'charge', 'email']);
    expect(await records.delete(second.record!)).toBe(true);
    expect((await records.list({ state: 'half_done' })).items).toEqual([]);
  });

  it('lists a run() that threw after two steps, with the key it was given', async () => {
    const key = `job-${randomUUID()}`;
    const fn = async () => {
      await service.step('reserve', () => 1);
      await service.step('charge', () => 2);
      throw new Error('the carrier is down');
    };
    await expect(service.run(key, fn, { scope: 'shipping', resumable: true })).rejects.toThrow();
    const { items } = await records.list({ state: 'half_done', route: 'run:shipping' });
    expect(items).toEqual([
      expect.objectContaining({ key, route: 'run:shipping', steps: expect.any(Array) }),
    ]);
    expect(items[0]).not.toHaveProperty('user');
    await until(() => abandoned().some((event) => event.record?.key === key), 'its report');
    expect(await records.delete(items[0])).toBe(true);
  });
});
