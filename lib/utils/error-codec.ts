import { ExecutionContext, HttpException } from '@nestjs/common';
import type { IdempotencyErrorMatcher } from '../interfaces/idempotency-options.interface';

/** A handler's error as stored by the option `storeErrors`: what a replay rebuilds it from. */
export interface StoredError {
  /** Name of the error's class (`''` for a thrown value that is not an object). */
  c: string;
  /** Its message. */
  m: string;
  /**
   * What the transport's exception filter sends for it: `HttpException.getResponse()`, or
   * `RpcException.getError()`. Absent for other errors, which Nest answers as internal errors.
   */
  r?: unknown;
}

type ErrorClass = abstract new (...args: never[]) => Error;

/** The HTTP status Nest answers an error with: an HttpException's own, else 500. */
export function errorStatus(error: unknown): number {
  return error instanceof HttpException ? error.getStatus() : 500;
}

/** Whether `matcher` is an exception class (rather than a predicate). */
function isErrorClass(matcher: unknown): matcher is ErrorClass {
  const prototype = (matcher as { prototype?: unknown } | null)?.prototype;
  return prototype === Error.prototype || prototype instanceof Error;
}

/**
 * Whether one of the `storeErrors` matchers matches `error`. `status` is its HTTP status, or
 * undefined where statuses do not apply (RPC). A predicate that throws does not match.
 */
export function matchesStoredErrors(
  matchers: readonly IdempotencyErrorMatcher[],
  error: unknown,
  context: ExecutionContext,
  status: number | undefined,
): boolean {
  return matchers.some((matcher) => {
    if (typeof matcher === 'number') return matcher === status;
    if (typeof matcher === 'string')
      return status !== undefined && `${matcher[0]}` === `${status}`[0];
    if (isErrorClass(matcher)) return error instanceof matcher;
    try {
      return (
        (matcher as (error: unknown, context: ExecutionContext) => boolean)(error, context) === true
      );
    } catch {
      return false;
    }
  });
}

/**
 * What is stored of an error: its class name, message and the body its exception filter sends.
 * Nothing else (an HTTP client's error, say, holds the request's headers and credentials).
 */
export function describeError(error: unknown): StoredError {
  if (!(error instanceof Error)) return { c: '', m: String(error) };
  const stored: StoredError = { c: error.constructor.name, m: error.message };
  if (error instanceof HttpException) stored.r = error.getResponse();
  const rpc = error as { getError?: unknown };
  if (typeof rpc.getError === 'function') stored.r = (rpc.getError as () => unknown).call(error);
  return stored;
}

/**
 * The error a replay throws: rebuilt with `rebuild` from what was stored (the transport's
 * exception, or an Error), and of the stored class when `matchers` list a class of that name,
 * so that exception filters and `instanceof` see what they saw the first time.
 */
export function rebuildError(
  stored: StoredError,
  matchers: readonly IdempotencyErrorMatcher[],
  rebuild: (stored: StoredError) => Error,
): Error {
  const error =
    stored.r === undefined
      ? Object.assign(new Error(stored.m), { name: stored.c || 'Error' })
      : rebuild(stored);
  const listed = matchers.find(
    (matcher): matcher is ErrorClass => isErrorClass(matcher) && matcher.name === stored.c,
  );
  if (listed) Object.setPrototypeOf(error, listed.prototype);
  error.message = stored.m;
  return error;
}
