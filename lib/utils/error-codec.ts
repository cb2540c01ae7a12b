import { ExecutionContext, HttpException } from '@nestjs/common';
import type { IdempotencyErrorMatcher } from '../interfaces/idempotency-options.interface';

/** A handler's error as stored by the option `storeErrors`: what a replay rebuilds it from. */
export interface StoredError {
  /** Name of the error's class (`''` for a thrown value that is not an object). */
  c: string;
  /** Its message. */
  m: string;
  /**
   * What the transport's exception filter sends for it: on HTTP `HttpException.getResponse()`,
   * on RPC `RpcException.getError()`. Absent for other errors, which Nest answers as internal
   * errors (their details never reach the client, nor a replay).
   */
  r?: unknown;
  /** Index in `storeErrors` of the class that matched it, when one did. */
  i?: number;
  /** That class's name: a list changed since may hold another class at `i`. */
  n?: string;
  /**
   * Its own enumerable fields that JSON carries back as they are (`declineCode`...), for an
   * error of a listed class only: a filter for that class may answer with them.
   */
  p?: Record<string, unknown>;
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

/** HttpException's own fields, which its constructor sets again. */
const BUILT_IN_FIELDS = new Set(['response', 'status', 'options', 'message', 'name', 'cause']);

/**
 * What is stored of an error: its class name and message, the body its exception filter sends
 * on this transport, and, for an error of a class listed in `storeErrors`, which one and its own
 * fields. Nothing else: an HTTP client's error, say, holds the request's headers and credentials.
 */
export function describeError(
  error: unknown,
  transport: 'http' | 'rpc',
  matchers: readonly IdempotencyErrorMatcher[],
): StoredError {
  if (!(error instanceof Error)) return { c: '', m: String(error) };
  const stored: StoredError = { c: error.constructor.name, m: error.message };
  const rpc = error as { getError?: unknown };
  if (transport === 'http' && error instanceof HttpException) stored.r = error.getResponse();
  if (transport === 'rpc' && typeof rpc.getError === 'function') {
    stored.r = (rpc.getError as () => unknown).call(error);
  }
  const index = matchers.findIndex((matcher) => isErrorClass(matcher) && error instanceof matcher);
  if (index >= 0) {
    stored.i = index;
    stored.n = (matchers[index] as ErrorClass).name;
    const fields = Object.entries(error).filter(
      ([name, value]) => !BUILT_IN_FIELDS.has(name) && isPlainData(value),
    );
    if (fields.length > 0) stored.p = Object.fromEntries(fields);
  }
  return stored;
}

/** Whether JSON carries `value` back as it is: strings, finite numbers, booleans, null. */
function isPlainData(value: unknown): boolean {
  return (
    value === null ||
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value))
  );
}

/**
 * The error a replay throws: rebuilt with `rebuild` from what was stored (the transport's
 * exception, or an Error), and of the class of `storeErrors` that matched it (found by its place
 * in the list, not its name: two classes may share one), with its fields, so that exception
 * filters and `instanceof` for that class see what they saw the first time. An error that
 * matched a listed parent class comes back of that class, not of its own subclass.
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
  const listed = stored.i === undefined ? undefined : matchers[stored.i];
  // A list changed since the record was stored may hold another class there now.
  if (isErrorClass(listed) && listed.name === (stored.n ?? stored.c)) {
    Object.setPrototypeOf(error, listed.prototype);
    Object.assign(error, stored.p);
  }
  error.message = stored.m;
  return error;
}
