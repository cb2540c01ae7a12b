import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  type DataPoint,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { METER_NAME, observeRecordCounts, RECORDS_METRIC } from '../../lib/observability/metrics';
import type { RecordCounts } from '../../lib/stores/record-listing';

/** A MeterProvider registered as the global one; `read()` collects the record gauges now. */
function registerMeter() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.disable();
  metrics.setGlobalMeterProvider(provider);
  return {
    provider,
    async read(): Promise<Record<string, number>> {
      await reader.forceFlush();
      const scope = exporter
        .getMetrics()
        .at(-1)
        ?.scopeMetrics.find((s) => s.scope.name === METER_NAME);
      const metric = scope?.metrics.find((m) => m.descriptor.name === RECORDS_METRIC);
      const counts: Record<string, number> = {};
      for (const point of (metric?.dataPoints ?? []) as DataPoint<number>[]) {
        counts[String(point.attributes['idempotency.record.state'])] = point.value;
      }
      return counts;
    },
  };
}

describe('record gauges', () => {
  afterEach(() => metrics.disable());

  let counts: RecordCounts = { running: 1, stuck: 2, half_done: 3, completed: 4 };
  const count = jest.fn(async () => counts);

  it('report the counts of each state at each collection, asking the store then only', async () => {
    const meter = registerMeter();
    const gauges = observeRecordCounts(count)!;
    expect(count).not.toHaveBeenCalled();
    expect(await meter.read()).toEqual({ running: 1, stuck: 2, half_done: 3, completed: 4 });
    counts = { running: 0, stuck: 0, half_done: 1, completed: 9 };
    expect(await meter.read()).toEqual({ running: 0, stuck: 0, half_done: 1, completed: 9 });
    gauges.stop();
    await meter.provider.shutdown();
  });

  it('move to a MeterProvider the app registers after boot, on refresh()', async () => {
    metrics.disable(); // the API's no-op provider, as before an SDK starts
    const gauges = observeRecordCounts(count)!;
    const meter = registerMeter();
    expect(await meter.read()).toEqual({});
    gauges.refresh();
    expect((await meter.read()).completed).toBe(counts.completed);
    gauges.stop();
    await meter.provider.shutdown();
  });

  it('report nothing for a collection where the store fails, and nothing once stopped', async () => {
    const meter = registerMeter();
    const failing = observeRecordCounts(() => Promise.reject(new Error('store down')))!;
    expect(await meter.read()).toEqual({});
    failing.stop();
    const stopped = observeRecordCounts(count)!;
    stopped.stop();
    stopped.refresh();
    const calls = count.mock.calls.length;
    await meter.read();
    expect(count.mock.calls.length).toBe(calls);
    await meter.provider.shutdown();
  });
});
