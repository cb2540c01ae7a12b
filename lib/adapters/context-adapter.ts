import type { ExecutionContext } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type { ResponseSnapshot } from '../utils/response-codec';

/** What the option `statusHeader` reports for a keyed request. */
export type IdempotencyOutcome =
  | 'first-run'
  | 'replayed'
  | 'in-progress'
  | 'key-reused'
  | 'key-missing'
  | 'key-invalid'
  | 'store-unavailable'
  | 'record-unreadable';

/**
 * Everything the interceptor needs that differs between transports (HTTP, RPC, GraphQL, gRPC,
 * WebSocket gateways, golevelup RabbitMQ handlers). The interceptor's flow is the same for all;
 * an adapter per context type fills in these steps.
 */
export interface IdempotencyContextAdapter {
  /**
   * Why this handler cannot be made idempotent at all (it then runs untouched, with a warning), or
   * undefined. E.g. a server-sent event stream, which must not be buffered.
   */
  unsupported(context: ExecutionContext): string | undefined;

  /**
   * Whether this request passes untouched, without a word: e.g. a query of a GraphQL resolver
   * class marked `@Idempotent()`, which makes its mutations idempotent. Optional.
   */
  bypass?(context: ExecutionContext): boolean;

  /** The raw key the request carries (validated by the caller), or undefined when it has none. */
  readKey(context: ExecutionContext, options: ResolvedIdempotencyOptions): unknown;

  /**
   * The request's authenticated principal (HTTP: `request.user`, else `request.raw.user`, see
   * `requestPrincipal`), which records are scoped to by default, or undefined when it has none. Optional: transports without one leave it out.
   */
  principal?(context: ExecutionContext): unknown;

  /**
   * A hash of what makes this request this request (method, path, payload...). It throws (or
   * rejects) an IdempotencyError when the payload cannot be read: never the same as another.
   */
  fingerprint(context: ExecutionContext): string | Promise<string>;

  /**
   * What the request is sent to, as the parts a fingerprint starts with: HTTP method and path
   * (without the query), or the message pattern. Routes sharing a `keySpace` hash it into every
   * fingerprint, so that one key sent to two endpoints is refused (422).
   */
  target(context: ExecutionContext): string[];

  /**
   * The route as the framework registered it, e.g. `POST /v1/users/:id` (global prefix, module
   * paths and URI version included), or undefined when the transport has none (RPC). Part of
   * the record's scope: two routes the framework tells apart never share records.
   */
  routePattern?(context: ExecutionContext): string | undefined;

  /**
   * What to store once the handler completed with `values` (everything it emitted), or a string
   * saying why it cannot be stored (the claim is then released).
   */
  capture(
    context: ExecutionContext,
    values: unknown[],
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot | string;

  /**
   * What to store of an error of the handler that the route's `storeErrors` match: the status
   * (HTTP), the headers to replay and, as `value`, the error (`describeError`).
   */
  captureError(
    context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot;

  /**
   * The status `storeErrors` matches an error by (HTTP: the status it is answered with), or
   * undefined where there are none (RPC).
   */
  errorStatus(error: unknown): number | undefined;

  /**
   * Applies a stored response to this request and returns what to emit instead of the handler:
   * its values, or for a stored error, the error rebuilt.
   */
  replay(
    context: ExecutionContext,
    response: ResponseSnapshot,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown>;

  /**
   * Undoes what {@link toException} set on this request's response (headers), when an outer
   * interceptor retried the request and it is about to be answered otherwise. Optional.
   */
  reset?(context: ExecutionContext): void;

  /** Tells the client what happened (option `statusHeader`), where the transport can. Optional. */
  outcome?(
    context: ExecutionContext,
    outcome: IdempotencyOutcome,
    options: ResolvedIdempotencyOptions,
  ): void;

  /**
   * What to emit instead of throwing `error`, where a thrown refusal would not reach the client
   * or would be settled wrongly: Nest's `ws` adapter sends a gateway's client no exception, and
   * golevelup hands a handler's error to the queue's error behaviour, which may dead-letter a
   * duplicate that only had to wait. Called with whatever the handler's pipeline failed with
   * (the exceptions {@link toException} made, and the handler's own errors); returns it thrown
   * again when it is not one to answer. Optional: the other transports throw.
   */
  answer?(
    context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown>;

  /** Turns a transport-neutral error into what this transport throws (HttpException...). */
  toException(
    context: ExecutionContext,
    error: IdempotencyError,
    options: ResolvedIdempotencyOptions,
  ): Error;
}
