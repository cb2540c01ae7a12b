import { CallHandler, ExecutionContext, RequestTimeoutException } from '@nestjs/common';
import { defer, Observable } from 'rxjs';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import type { ClaimCore } from '../core/claim-core';
import type { Claim } from '../core/store-calls';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { isPromise } from '../utils/is-promise';
import { type Route, timeRun } from './route-resolver';
import type { GlobalSerializers } from './serializers';

/** A claim and the route it was made on (none when a subclass made the route idempotent). */
export interface RouteClaim extends Claim {
  /** The cached route, which keeps the handler's mean run time. */
  cached: Route | null;
}

/**
 * A route's handler as claimed work: the interceptor's side of the claim core. It subscribes the
 * handler itself and hands the caller what it emitted once the outcome is recorded.
 */
export class ClaimedHandler {
  constructor(
    private readonly core: ClaimCore,
    private readonly serializers: GlobalSerializers,
  ) {}

  /**
   * Runs the handler under the claim, subscribed here rather than by the caller: if the caller
   * goes away (client disconnect, a timeout interceptor), the handler still runs to its end and
   * its outcome is still recorded, so a retry never runs it a second time concurrently. The
   * values are passed on only once the outcome is stored or released, so the response leaves
   * after the completion write (and a stream reaches the caller once it ends).
   *
   * @param handled called once the handler (and the interceptors inside this one) settled
   */
  run(
    context: ExecutionContext,
    next: CallHandler,
    adapter: IdempotencyContextAdapter,
    claim: RouteClaim,
    handled: () => void,
  ): Observable<unknown> {
    const { options } = claim;
    const values: unknown[] = [];
    const started = performance.now();
    const outcome = this.core.execute(claim, {
      run: () => collect(next.handle(), values),
      // What the client is sent: after the global serializers.
      capture: () => {
        const sent = this.serializers.apply(context, values);
        return isPromise(sent)
          ? sent.then((applied) => adapter.capture(context, applied, options))
          : adapter.capture(context, sent, options);
      },
      context,
      errorStatus: (error) => adapter.errorStatus(error),
      captureError: (error) => adapter.captureError(context, error, options),
      refuse: (error) => adapter.toException(context, error, options),
      settled: () => {
        handled();
        timeRun(claim.cached, started);
      },
      rolledBack: () => void (values.length = 0), // none of it is sent
      keepsClaim: isTimeout,
    });
    return emitWhenSettled(outcome, values);
  }

  /**
   * The handler of a request that runs without a claim (no key, or `failOpen`): in the app's
   * transaction all the same on a `transactional` route, so a client cannot opt out of it; on a
   * `resumable` one, its steps run as plain calls.
   */
  unclaimed(next: CallHandler, options: ResolvedIdempotencyOptions): Observable<unknown> {
    if (!options.transactional && !options.resumable) return next.handle();
    return defer(() => {
      const values: unknown[] = [];
      const run = () => collect(next.handle(), values);
      return emitWhenSettled(this.core.unclaimed(options, run), values);
    });
  }
}

/**
 * What the handler emitted, once `outcome` settles, then completion or its error: on error too,
 * what it emitted before failing reaches the caller, as without this module (a rollback empties
 * `values` first). Nobody may be listening any more when it fails: that is never unhandled.
 */
function emitWhenSettled(outcome: Promise<unknown>, values: unknown[]): Observable<unknown> {
  outcome.catch(() => {});
  return new Observable((subscriber) => {
    const emit = () => values.forEach((value) => subscriber.next(value));
    outcome.then(
      () => {
        emit();
        subscriber.complete();
      },
      (error: unknown) => {
        emit();
        subscriber.error(error);
      },
    );
  });
}

/** Every value `source` emits, pushed onto `values`; resolves when it completes. */
function collect(source: Observable<unknown>, values: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => {
    source.subscribe({ next: (value) => values.push(value), error: reject, complete: resolve });
  });
}

/** An error of a timeout interceptor: rxjs `timeout()` or Nest's RequestTimeoutException (408). */
function isTimeout(error: unknown): boolean {
  return (
    error instanceof RequestTimeoutException ||
    (error instanceof Error && error.name === 'TimeoutError')
  );
}
