import type { IdempotencyEventType } from '../interfaces/idempotency-event.interface';

/** Store operations the interceptor times. */
export type IdempotencyStoreOperation = 'claim' | 'complete' | 'release' | 'extend' | 'watch';

/** What the interceptor reports to a metrics backend. */
export interface IdempotencyMetrics {
  /** One outcome of one request (the same types as `onEvent`). */
  outcome(type: IdempotencyEventType, handler: string): void;
  /** How long one store call took, in milliseconds, and whether it failed. */
  storeLatency(operation: IdempotencyStoreOperation, durationMs: number, failed: boolean): void;
}

/**
 * OpenTelemetry metrics through `@opentelemetry/api` when it is installed, else undefined.
 * (Implementation pending: returns undefined for now.)
 */
export function createOpenTelemetryMetrics(): IdempotencyMetrics | undefined {
  return undefined;
}
