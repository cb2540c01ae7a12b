import type { Counter, Histogram, MeterProvider } from '@opentelemetry/api';
import type { IdempotencyEventType } from '../interfaces/idempotency-event.interface';
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
