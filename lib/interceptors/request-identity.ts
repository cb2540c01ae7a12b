import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';
import type {
  IdempotencyKeyValue,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import { fingerprint } from '../utils/fingerprint';
import { withTimeout } from '../utils/timeout';
import { describe, type OutcomeEvents } from '../core/outcome-events';
import { isPromise } from '../utils/is-promise';

/** What an app whose route refuses a body it cannot fingerprint can do. */
const UNREADABLE_BODY_HINT =
  "Keyed requests with such a body are refused (400): parse it before the claim (bind multer's " +
  'FileInterceptor, FilesInterceptor... to the route), or set the route option `fingerprint` to ' +
  'a function of what identifies the request (or false).';

/** The most a route's own fingerprint may hash, in characters of its canonical form (1 MiB). */
const MAX_CUSTOM_FINGERPRINT = 1024 * 1024;

/**
 * Works out a request's key and fingerprint, through the route's own functions (options `key`
 * and `fingerprint`, sync or async) or the transport adapter's defaults. What a route's function
 * throws is the client's problem to hear about (400), never a 500.
 */
export class RequestIdentity {
  constructor(private readonly events: OutcomeEvents) {}

  /** The raw key (checked by the caller), or undefined / null when the request has none. */
  key(
    context: ExecutionContext,
    adapter: IdempotencyContextAdapter,
    options: ResolvedIdempotencyOptions,
    handler: string,
  ): unknown {
    const read = options.key;
    if (!read) return adapter.readKey(context, options);
    const same = (value: IdempotencyKeyValue) => value;
    return this.callHook(() => read(context), same, options, handler, 'key');
  }

  /**
   * The request's fingerprint (option `fingerprint`): the adapter's, a hash of what the route's
   * function returns, or none; in a key space, the method and path are always part of it.
   */
  fingerprint(
    context: ExecutionContext,
    adapter: IdempotencyContextAdapter,
    options: ResolvedIdempotencyOptions,
    handler: string,
  ): string | Promise<string> {
    const custom = options.fingerprint;
    if (custom === true) return this.adapterFingerprint(context, adapter, handler);
    const parts = options.keySpace === undefined ? [] : adapter.target(context);
    if (custom === false) return parts.length === 0 ? '' : fingerprint(parts, undefined);
    const hash = (value: unknown) => fingerprint(parts, value, MAX_CUSTOM_FINGERPRINT);
    return this.callHook(() => custom(context), hash, options, handler, 'fingerprint');
  }

  /**
   * The adapter's fingerprint. A payload it cannot read (a multipart body nothing parsed before
   * the claim) is refused (400), never taken for the same as another; the app hears why, once.
   */
  private adapterFingerprint(
    context: ExecutionContext,
    adapter: IdempotencyContextAdapter,
    handler: string,
  ): string | Promise<string> {
    const refuse = (error: unknown): never => {
      if (error instanceof IdempotencyKeyInvalidError) {
        this.events.warnOnce(handler, `${error.message} ${UNREADABLE_BODY_HINT}`, 'body');
      }
      throw error;
    };
    try {
      const result = adapter.fingerprint(context);
      return isPromise(result) ? result.catch(refuse) : result;
    } catch (error) {
      return refuse(error);
    }
  }

  /**
   * Calls a route's key or fingerprint function and `then` on its result: what either throws,
   * or a promise that rejects or does not settle within `storeTimeout`, answers 400.
   */
  private callHook<T, R>(
    hook: () => T | Promise<T>,
    then: (value: T) => R,
    options: ResolvedIdempotencyOptions,
    handler: string,
    name: string,
  ): R | Promise<R> {
    const refuse = (error: unknown): never => {
      this.events.warnOnce(
        handler,
        `the ${name} function failed (${describe(error)}); answering 400`,
        name,
      );
      throw new IdempotencyKeyInvalidError(
        `The idempotency ${name} could not be worked out for this request.`,
        { cause: error },
      );
    };
    try {
      const result = hook();
      if (!isPromise(result)) return then(result);
      const late = () => new Error(`no answer within storeTimeout (${options.storeTimeout} ms)`);
      return withTimeout(result, options.storeTimeout, late).then(then).catch(refuse);
    } catch (error) {
      return refuse(error);
    }
  }
}
