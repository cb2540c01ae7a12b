import type { ExecutionContext } from '@nestjs/common';
import { map, type Observable, of, throwError, timer } from 'rxjs';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { fingerprint } from '../utils/fingerprint';
import type { StoredError } from '../utils/error-codec';
import { loadPeer } from '../utils/load-optional';
import { rabbitHandler } from '../utils/nest-metadata';
import type { ResponseSnapshot } from '../utils/response-codec';
import type { IdempotencyContextAdapter } from './context-adapter';
import { headerValue, payloadKey, refusalBody } from './rpc-context.adapter';
import { captureError, captureValues, replayValues } from './value-outcome';

/** The parts of the amqplib message golevelup hands a handler (its second argument) read here. */
interface AmqpMessage {
  fields?: { redelivered?: boolean };
  properties?: { headers?: Record<string, unknown> };
}

/** golevelup's `Nack`: a handler returns it to nack the message (requeued or not). */
type NackClass = new (requeue?: boolean) => object;

/**
 * `@RabbitSubscribe()` and `@RabbitRPC()` handlers of `@golevelup/nestjs-rabbitmq` (context type
 * `rmq`), which golevelup calls with the deserialized payload, the raw amqplib message and its
 * headers. The key is the message's `Idempotency-Key` header (the `headerName`, in any case),
 * else the payload's `idempotencyKey` field; the fingerprint the handler's binding and the
 * payload. What the handler returned (an RPC reply) is stored; golevelup acks a message (and
 * sends the reply) only once its handler's outcome is stored, and acks a duplicate with the
 * stored reply. A handler that returns a `Nack` declined the message: nothing is stored.
 *
 * A refusal is never thrown, which would hand it to the queue's error behaviour (requeued at
 * once, over and over, or dead-lettered): a duplicate still in progress, or a store outage, is
 * requeued after the time the refusal says to wait (a subscriber's duplicate first waits for the
 * outcome: see `onConflict`); a refusal that no redelivery can change (key reused, missing,
 * invalid) is nacked without requeue on a subscriber (dead-lettered when the queue has a
 * dead-letter exchange), and answered with its body on an RPC.
 *
 * A stored error (`storeErrors`) went to the queue's error behaviour with the delivery that
 * threw it; a duplicate is settled once, never handed to it again, where REQUEUE would redeliver
 * it for ever and NACK dead-letter every copy: a subscriber's is acked. An RPC's requester is
 * answered as the first one was, by the error behaviour (an error handler that replies), unless
 * the message is a redelivery, which that behaviour may have requeued: it is answered with
 * `{ status: 'error', message }`.
 */
export class GolevelupContextAdapter implements IdempotencyContextAdapter {
  private readonly Nack: NackClass;
  /** The refusals {@link toException} made. */
  private readonly refusals = new WeakMap<Error, IdempotencyError>();

  constructor() {
    // Loaded here, not at import: apps without golevelup need not install it.
    this.Nack = loadPeer<{ Nack: NackClass }>(
      '@golevelup/nestjs-rabbitmq',
      'making @RabbitSubscribe() and @RabbitRPC() handlers idempotent',
    ).Nack;
  }

  unsupported(context: ExecutionContext): string | undefined {
    return rabbitHandler(context.getHandler())?.batchOptions
      ? 'a batch subscriber handles many messages in one call'
      : undefined;
  }

  readKey(context: ExecutionContext, options: ResolvedIdempotencyOptions): unknown {
    const message = context.getArgByIndex<AmqpMessage | undefined>(1);
    const header = headerValue(message?.properties?.headers, options.headerName);
    return header !== undefined ? header : payloadKey(context.getArgByIndex(0));
  }

  fingerprint(context: ExecutionContext): string {
    return fingerprint(this.target(context), context.getArgByIndex(0));
  }

  /** The handler's binding, as golevelup names it: `exchange::routingKey::queue`. */
  target(context: ExecutionContext): string[] {
    const config = rabbitHandler(context.getHandler()) ?? {};
    const routingKeys = [config.routingKey ?? []].flat().join(',');
    return ['rabbitmq', `${config.exchange ?? ''}::${routingKeys}::${config.queue ?? ''}`];
  }

  capture(_context: ExecutionContext, values: unknown[]): ResponseSnapshot | string {
    if (values.some((value) => value instanceof this.Nack)) return 'a Nack (the message declined)';
    return captureValues(values);
  }

  captureError(
    _context: ExecutionContext,
    error: unknown,
    options: ResolvedIdempotencyOptions,
  ): ResponseSnapshot {
    return captureError(error, 'rpc', options.storeErrors);
  }

  errorStatus(): undefined {
    return undefined;
  }

  replay(
    context: ExecutionContext,
    snapshot: ResponseSnapshot,
    options: ResolvedIdempotencyOptions,
  ): Observable<unknown> {
    if (snapshot.error) {
      // The error behaviour had the error with the first delivery: thrown again, REQUEUE would
      // redeliver this one for ever, NACK dead-letter every copy. A subscriber's is acked.
      if (rabbitHandler(context.getHandler())?.type !== 'rpc') return of(undefined);
      // A new request is answered by the error behaviour, as the first one was; a redelivery
      // (perhaps requeued by that behaviour) with the error, rather than never.
      const message = context.getArgByIndex<AmqpMessage | undefined>(1);
      if (message?.fields?.redelivered) {
        return of({ status: 'error', message: (snapshot.value as StoredError).m });
      }
    }
    const rebuild = (stored: { m: string }) => new Error(stored.m);
    return replayValues(snapshot, options.storeErrors, rebuild);
  }

  toException(_context: ExecutionContext, error: IdempotencyError): Error {
    // Never thrown to golevelup: answer() settles the message instead.
    const exception = new Error(`${error.code}: ${error.message}`, { cause: error });
    this.refusals.set(exception, error);
    return exception;
  }

  answer(context: ExecutionContext, error: unknown): Observable<unknown> {
    const refusal = error instanceof Error ? this.refusals.get(error) : undefined;
    if (!refusal) return throwError(() => error);
    if (refusal.retryAfterMs !== undefined) {
      // Held for the time it was told to wait, then requeued: not redelivered at once, over and
      // over, while the first delivery runs or the store is down.
      return timer(refusal.retryAfterMs).pipe(map(() => new this.Nack(true)));
    }
    return rabbitHandler(context.getHandler())?.type === 'rpc'
      ? of(refusalBody(refusal))
      : of(new this.Nack(false));
  }
}
