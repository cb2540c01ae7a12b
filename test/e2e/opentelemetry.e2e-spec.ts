import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPoint,
  Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import Redis from 'ioredis';
import { createServer } from 'node:net';
import { IdempotencyModuleOptions, MemoryIdempotencyStore } from '../../lib';
import {
  METER_NAME,
  OUTCOMES_METRIC,
  STORE_DURATION_METRIC,
} from '../../lib/observability/metrics';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { PLATFORMS, post, startTestApp, TestApp } from '../support/test-app';

/** A MeterProvider registered as the global one, exporting to memory only when flushed. */
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

  /** The package's metrics as collected now (cumulative since registration). */
  async collect(): Promise<MetricData[]> {
    await this.reader.forceFlush();
    const latest = this.exporter.getMetrics().at(-1);
    const scope = latest?.scopeMetrics.find((s) => s.scope.name === METER_NAME);
    return scope?.metrics ?? [];
  }

  async shutdown(): Promise<void> {
    metrics.disable();
    await this.provider.shutdown();
  }
}

function points<T>(collected: MetricData[], name: string): DataPoint<T>[] {
  const metric = collected.find((m) => m.descriptor.name === name);
  return (metric?.dataPoints ?? []) as DataPoint<T>[];
}

/** Outcome counts of one handler: `{ claimed: 1, completed: 1, ... }`. */
function outcomes(collected: MetricData[], handler: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const point of points<number>(collected, OUTCOMES_METRIC)) {
    if (point.attributes['idempotency.handler'] !== handler) continue;
    counts[String(point.attributes['idempotency.outcome'])] = point.value;
  }
  return counts;
}

/** Store call counts by `operation` or `operation:error.type`. */
function storeCalls(collected: MetricData[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const point of points<Histogram>(collected, STORE_DURATION_METRIC)) {
    const error = point.attributes['error.type'];
    const name = `${String(point.attributes['idempotency.store.operation'])}${error ? `:${String(error)}` : ''}`;
    counts[name] = point.value.count;
  }
  return counts;
}

let seq = 0;
const newKey = () => `otel-${Date.now()}-${++seq}`;

let redis: Redis;
beforeAll(() => {
  redis = inspectionClient();
});
afterAll(async () => {
  await redis.quit();
});

describe.each(PLATFORMS)('OpenTelemetry metrics on %s with Redis', (platform) => {
  const prefix = uniquePrefix(`otel-${platform}`);
  let t: TestApp;
  let meter: TestMeter;

  beforeAll(async () => {
    t = await startTestApp(platform, { redis: testRedisUrl(), keyPrefix: prefix });
    // Recorded before any SDK is registered: into the API's no-op provider.
    expect((await post(t.url, '/payments/text', { key: newKey() })).status).toBe(201);
    // Registered after the app started and recorded, as an SDK set up late would be.
    meter = new TestMeter();
  });
  afterAll(async () => {
    await t.close();
    await meter.shutdown();
    await deleteKeysUnder(redis, prefix);
  });

  it('counts each outcome per handler and times every store call in seconds', async () => {
    const key = newKey();
    expect((await post(t.url, '/payments', { key, body: { amount: 1 } })).status).toBe(201);
    expect((await post(t.url, '/payments', { key, body: { amount: 1 } })).status).toBe(201);
    expect((await post(t.url, '/payments', { key, body: { amount: 2 } })).status).toBe(422);
    expect((await post(t.url, '/payments', { body: { amount: 3 } })).status).toBe(201);
    expect((await post(t.url, '/payments/required')).status).toBe(400);

    const collected = await meter.collect();
    expect(outcomes(collected, 'PaymentsController.create')).toEqual({
      claimed: 1,
      completed: 1,
      replayed: 1,
      key_reused: 1,
      bypassed: 1,
    });
    // A request refused for want of its key: rejected, nothing claimed or run.
    expect(outcomes(collected, 'PaymentsController.required')).toEqual({ rejected: 1 });
    // Recorded before the SDK was registered: lost, as OpenTelemetry has no proxy provider.
    expect(outcomes(collected, 'PaymentsController.text')).toEqual({});
    expect(storeCalls(collected)).toEqual({ claim: 3, complete: 1 });

    const durations = points<Histogram>(collected, STORE_DURATION_METRIC);
    const descriptor = collected.find((m) => m.descriptor.name === STORE_DURATION_METRIC)!;
    expect(descriptor.descriptor.unit).toBe('s');
    for (const point of durations) {
      // Seconds, not milliseconds: a loopback Redis answers well within a second.
      expect(point.value.sum! / point.value.count).toBeLessThan(1);
      expect(point.value.sum!).toBeGreaterThan(0);
    }
  });

  it('counts a released claim when the handler fails', async () => {
    const before = outcomes(await meter.collect(), 'PaymentsController.fail');
    expect((await post(t.url, '/payments/fail', { key: newKey() })).status).toBe(402);
    const after = outcomes(await meter.collect(), 'PaymentsController.fail');
    expect((after.claimed ?? 0) - (before.claimed ?? 0)).toBe(1);
    expect((after.released ?? 0) - (before.released ?? 0)).toBe(1);
  });
});

describe('OpenTelemetry metrics of a failing store', () => {
  let t: TestApp;
  let meter: TestMeter;

  beforeAll(async () => {
    meter = new TestMeter();
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    t = await startTestApp('express', { redis: `redis://127.0.0.1:${port}`, storeTimeout: 300 });
  });
  afterAll(async () => {
    await t.close();
    await meter.shutdown();
  });

  it('marks failed store calls with error.type and counts store_error', async () => {
    expect((await post(t.url, '/payments', { key: newKey(), body: {} })).status).toBe(503);
    const collected = await meter.collect();
    // The claim failed; the release that follows it (the claim might have reached the store
    // before the connection failed) fails too, when its retry ends: before or after this read.
    const calls = storeCalls(collected);
    expect(calls['claim:_OTHER']).toBe(1);
    expect(Object.keys(calls).filter((call) => !/^(claim|release):_OTHER$/.test(call))).toEqual([]);
    expect(outcomes(collected, 'PaymentsController.create')).toEqual({ store_error: 1 });
  });
});

describe('OpenTelemetry metrics with metrics: false', () => {
  let t: TestApp;
  let meter: TestMeter;

  beforeAll(async () => {
    meter = new TestMeter();
    const options: IdempotencyModuleOptions = {
      store: new MemoryIdempotencyStore(),
      metrics: false,
    };
    t = await startTestApp('fastify', options);
  });
  afterAll(async () => {
    await t.close();
    await meter.shutdown();
  });

  it('records nothing', async () => {
    const key = newKey();
    expect((await post(t.url, '/payments', { key, body: {} })).status).toBe(201);
    expect((await post(t.url, '/payments', { key, body: {} })).status).toBe(201);
    expect(await meter.collect()).toEqual([]);
  });
});
