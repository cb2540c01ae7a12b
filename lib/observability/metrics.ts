import type {
  Counter,
  Histogram,
  MeterProvider,
  ObservableCallback,
  ObservableGauge,
} from '@opentelemetry/api';
import type { IdempotencyEventType } from '../interfaces/idempotency-event.interface';
import { LISTED_STATES, type RecordCounts } from '../stores/record-listing';
import { loadOptional } from '../utils/load-optional';

/** Store operations the interceptor times. */
export type IdempotencyStoreOperation =
  | 'claim'
  | 'complete'
  | 'release'
  | 'extend'
  | 'watch'
  /** Recording a step of a resumable run (`recordStep`, `recordStepInTransaction`). */
  | 'step';

/** What the interceptor reports to a metrics backend. */
export interface IdempotencyMetrics {
  /**
   * Whether anything records what is reported: false while the app registered no metrics SDK
   * (the API's no-op provider), so that callers skip the work of measuring.
   */
  readonly recording: boolean;
  /** One outcome of one request (the same types as `onEvent`). */
  outcome(type: IdempotencyEventType, handler: string): void;
  /** How long one store call took, in milliseconds, and whether it failed. */
  storeLatency(operation: IdempotencyStoreOperation, durationMs: number, failed: boolean): void;
}

/** Name of the meter the instruments belong to (the instrumentation scope). */
export const METER_NAME = 'nestjs-idempotency';

/** Counter of outcomes, one per `onEvent` event, by `idempotency.outcome` and `idempotency.handler`. */
export const OUTCOMES_METRIC = 'idempotency.outcomes';

/**
 * Histogram of store call durations in seconds (OpenTelemetry's semantic conventions measure
 * durations in seconds), by `idempotency.store.operation`, plus `error.type` on failed calls.
 */
export const STORE_DURATION_METRIC = 'idempotency.store.duration';

/**
 * Bucket bounds of the store duration histogram, in seconds: from 0.5 ms (a Redis round trip on a
 * local network) to 10 s (far past any sensible `storeTimeout`).
 */
const DURATION_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

interface Instruments {
  provider: MeterProvider;
  /** The provider hands out the API's no-op meter: nothing is recorded. */
  noop: boolean;
  outcomes: Counter;
  duration: Histogram;
}

/**
 * OpenTelemetry metrics through `@opentelemetry/api` when it is installed, else undefined. Without
 * a registered SDK the API's no-op instruments cost next to nothing.
 *
 * The global MeterProvider is looked up on every record (a property read): the metrics API has no
 * proxy provider, so instruments created before the application registers its SDK would stay
 * no-ops forever. They are created again whenever the global provider changes.
 */
export function createOpenTelemetryMetrics(): IdempotencyMetrics | undefined {
  const api = loadOptional<typeof import('@opentelemetry/api')>('@opentelemetry/api');
  if (!api) return undefined;
  let current: Instruments | undefined;
  const instruments = (): Instruments => {
    const provider = api.metrics.getMeterProvider();
    if (current?.provider !== provider) {
      const meter = provider.getMeter(METER_NAME);
      current = {
        provider,
        noop: meter === api.createNoopMeter(),
        outcomes: meter.createCounter(OUTCOMES_METRIC, {
          description:
            'Outcomes of idempotent requests (claimed, completed, replayed, conflict...)',
          unit: '{outcome}',
        }),
        duration: meter.createHistogram(STORE_DURATION_METRIC, {
          description: 'Duration of idempotency store calls, timeouts included',
          unit: 's',
          advice: { explicitBucketBoundaries: DURATION_BUCKETS },
        }),
      };
    }
    return current;
  };
  return {
    get recording() {
      return !instruments().noop;
    },
    outcome(type, handler) {
      instruments().outcomes.add(1, {
        'idempotency.outcome': type,
        'idempotency.handler': handler,
      });
    },
    storeLatency(operation, durationMs, failed) {
      instruments().duration.record(durationMs / 1000, {
        'idempotency.store.operation': operation,
        // The semantic conventions' attribute for failures; `_OTHER` when no finer class is known.
        ...(failed ? { 'error.type': '_OTHER' } : {}),
      });
    },
  };
}

/**
 * Observable gauge of the records each state holds (`running`, `stuck`, `half_done`,
 * `completed`) under the module's `keyPrefix`, by `idempotency.record.state`: every process
 * reports the same store-wide counts (alert on their `max`).
 */
export const RECORDS_METRIC = 'idempotency.records';

/** The record gauges of one module, while it runs (see {@link observeRecordCounts}). */
export interface RecordGauges {
  /** Moves the gauges to the global MeterProvider if the app registered another since. */
  refresh(): void;
  stop(): void;
}

/**
 * Registers the {@link RECORDS_METRIC} gauges with the global MeterProvider through
 * `@opentelemetry/api` (undefined when it is not installed). `count` is called at each
 * collection (the SDK's export interval), so the store is asked only when someone reads; a
 * collection where it fails reports nothing. Observable instruments are called back by the
 * provider they were made on: {@link RecordGauges.refresh} makes them again on a provider the app
 * registered after boot.
 */
export function observeRecordCounts(count: () => Promise<RecordCounts>): RecordGauges | undefined {
  const api = loadOptional<typeof import('@opentelemetry/api')>('@opentelemetry/api');
  if (!api) return undefined;
  let current: { provider: MeterProvider; gauge: ObservableGauge } | undefined;
  let stopped = false;
  const observe: ObservableCallback = async (result) => {
    let counts: RecordCounts;
    try {
      counts = await count();
    } catch {
      return;
    }
    for (const state of LISTED_STATES) {
      result.observe(counts[state], { 'idempotency.record.state': state });
    }
  };
  const refresh = () => {
    const provider = api.metrics.getMeterProvider();
    if (stopped || current?.provider === provider) return;
    current?.gauge.removeCallback(observe);
    const gauge = provider.getMeter(METER_NAME).createObservableGauge(RECORDS_METRIC, {
      description: 'Idempotency records by state (running, stuck, half_done, completed)',
      unit: '{record}',
    });
    gauge.addCallback(observe);
    current = { provider, gauge };
  };
  refresh();
  return {
    refresh,
    stop() {
      stopped = true;
      current?.gauge.removeCallback(observe);
      current = undefined;
    },
  };
}
