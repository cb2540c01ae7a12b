import type { ExecutionContext } from '@nestjs/common';
import { type Observable, of, throwError } from 'rxjs';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { fingerprint } from '../utils/fingerprint';
import { loadPeer } from '../utils/load-optional';
import type { ResponseSnapshot } from '../utils/response-codec';
import type { IdempotencyContextAdapter } from './context-adapter';
import { payloadKey, type RefusalBody, refusalBody } from './rpc-context.adapter';
import { captureError, captureValues, replayValues } from './value-outcome';

/** The event Nest's exception filter sends a gateway's client its errors under. */
const GATEWAY_EXCEPTION_EVENT = 'exception';

/** The part of a gateway's client (a socket.io Socket, a `ws` WebSocket) read here. */
interface GatewayClient {
  /**
   * socket.io's per-socket data (`socket.data`), where an authentication middleware or guard
   * puts the user; on a `ws` WebSocket, set `client.data = { user }` the same way.
   */
  data?: { user?: unknown };
}

type WsExceptionClass = new (error: string | object) => Error;

/**
 * `@SubscribeMessage()` handlers of WebSocket gateways, on `@nestjs/platform-socket.io` and
 * `@nestjs/platform-ws`. The key is the message's `idempotencyKey` field (or the `key` option's),
 * the fingerprint the message name and payload, the owner the socket's user (`client.data.user`).
 * Every value the handler emitted is stored and emitted again on a replay, so Nest answers the
 * same way: an ack, or a message to emit for a value with an `event` field (socket.io), or a
 * message sent back (ws).
 *
 * A refusal is not thrown: Nest 11's `ws` adapter sends the client no exception, and a socket.io
 * client waiting for an ack would wait in vain. It is answered with the body every message
 * transport sends (`{ status: 'error', code, message, retryAfterMs? }`): as the ack when the
 * socket.io client asked for one, else as Nest's `exception` event (on ws, the message
 * `{ event: 'exception', data }`, as Nest 12 sends exceptions to ws clients).
 */
export class WsContextAdapter implements IdempotencyContextAdapter {
  private readonly WsException: WsExceptionClass;
  /** The refusals {@link toException} made, with what the client is told. */
  private readonly refusals = new WeakMap<Error, RefusalBody>();

  constructor() {
    // Loaded here, not at import: apps without gateways need not install it.
    this.WsException = loadPeer<{ WsException: WsExceptionClass }>(
      '@nestjs/websockets',
      'making @SubscribeMessage() handlers idempotent',
    ).WsException;
  }

  unsupported(): undefined {
    return undefined;
  }

  readKey(context: ExecutionContext): unknown {
    return payloadKey(context.switchToWs().getData());
  }

  principal(context: ExecutionContext): unknown {
    return context.switchToWs().getClient<GatewayClient | undefined>()?.data?.user;
  }

  fingerprint(context: ExecutionContext): string {
    return fingerprint(this.target(context), context.switchToWs().getData());
  }

  target(context: ExecutionContext): string[] {
    return ['ws', String(context.switchToWs().getPattern())];
  }

  capture(_context: ExecutionContext, values: unknown[]): ResponseSnapshot | string {
    return captureValues(values);
  }

  captureError(
    _context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot {
    // A WsException is stored with its error (getError()), as an RpcException is.
    return captureError(error, 'rpc', options.storeErrors);
  }

  errorStatus(): undefined {
    return undefined;
  }

  replay(
    _context: ExecutionContext,
    snapshot: ResponseSnapshot,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown> {
    const rebuild = (stored: { r?: unknown }) => new this.WsException(stored.r as object);
    return replayValues(snapshot, options.storeErrors, rebuild);
  }

  toException(_context: ExecutionContext, error: IdempotencyError): Error {
    // What Nest's filter would emit, were it thrown: answer() sends it instead.
    const body = refusalBody(error);
    const exception = new this.WsException(body);
    this.refusals.set(exception, body);
    return exception;
  }

  answer(context: ExecutionContext, error: unknown): Observable<unknown> {
    const body = error instanceof Error ? this.refusals.get(error) : undefined;
    if (!body) return throwError(() => error);
    // socket.io hands the handler its ack function after the payload; ws, the message's name.
    const acked = typeof context.getArgByIndex(2) === 'function';
    return of(acked ? body : { event: GATEWAY_EXCEPTION_EVENT, data: body });
  }
}
