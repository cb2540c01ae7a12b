import { HttpException } from '@nestjs/common';
import { defer, from, type Observable } from 'rxjs';
import type { IdempotencyErrorMatcher } from '../interfaces/idempotency-options.interface';
import { describeError, rebuildError, type StoredError } from '../utils/error-codec';
import { type ResponseSnapshot, unreplayableReason } from '../utils/response-codec';
import { decodeValue, encodeValue } from '../utils/value-codec';

/**
 * Outcomes that are values of a program rather than HTTP responses: what a GraphQL resolver, a
 * gRPC method, a WebSocket gateway, a golevelup RabbitMQ handler or `IdempotencyService.run()`'s
 * function returned or threw. One mapping for all of them, so a value or an error stored by one
 * replays as it does on the others.
 */

/** What to store of a returned value (see `encodeValue`), or why it cannot be stored. */
export function captureValue(value: unknown): ResponseSnapshot | string {
  const reason = unreplayableReason(value);
  if (reason) return reason;
  try {
    return { value: encodeValue(value) };
  } catch (error) {
    return `not storable as data (${(error as Error).message})`;
  }
}

/**
 * What to store of an error `storeErrors` matched: its class, message and, per transport, what
 * its exception filter sends (`describeError`); with the status of an HttpException on `http`.
 */
export function captureError(
  error: unknown,
  transport: 'http' | 'rpc',
  storeErrors: readonly IdempotencyErrorMatcher[],
): ResponseSnapshot {
  const value = describeError(error, transport, storeErrors);
  if (transport === 'http' && error instanceof HttpException) {
    return { status: error.getStatus(), value, error: true };
  }
  return { value, error: true };
}

/**
 * The error a stored error replays as: `rebuild` makes the transport's exception from what its
 * filter sent the first time (`StoredError.r`, and the HTTP status where there was one).
 */
export function replayedError(
  snapshot: ResponseSnapshot,
  storeErrors: readonly IdempotencyErrorMatcher[],
  rebuild: (stored: StoredError, status: number | undefined) => Error,
): Error {
  const stored = snapshot.value as StoredError;
  return rebuildError(stored, storeErrors, (error) => rebuild(error, snapshot.status));
}

/** The stored value, or, for a stored error, that error rebuilt (thrown; see {@link replayedError}). */
export function replayValue(
  snapshot: ResponseSnapshot,
  storeErrors: readonly IdempotencyErrorMatcher[],
  rebuild: (stored: StoredError, status: number | undefined) => Error,
): unknown {
  if (snapshot.error) throw replayedError(snapshot, storeErrors, rebuild);
  return decodeValue(snapshot.value as string);
}

/**
 * What to store of every value a handler emitted (a gateway may answer with several messages),
 * so that a replay emits the same values in the same order; or why they cannot be stored.
 */
export function captureValues(values: unknown[]): ResponseSnapshot | string {
  for (const value of values) {
    const reason = unreplayableReason(value);
    if (reason) return reason;
  }
  return captureValue(values);
}

/** The values {@link captureValues} stored, emitted again; a stored error is thrown rebuilt. */
export function replayValues(
  snapshot: ResponseSnapshot,
  storeErrors: readonly IdempotencyErrorMatcher[],
  rebuild: (stored: StoredError, status: number | undefined) => Error,
): Observable<unknown> {
  return defer(() => from(replayValue(snapshot, storeErrors, rebuild) as unknown[]));
}
