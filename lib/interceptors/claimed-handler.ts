import { CallHandler, ExecutionContext, Logger, RequestTimeoutException } from '@nestjs/common';
import { Observable } from 'rxjs';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import type { OutcomeRecorder } from './outcome-recorder';
import { type Route, timeRun } from './route-resolver';
import type { Claim, StoreCalls } from './store-calls';

/** A claim and the route it was made on (none when a subclass made the route idempotent). */
export interface RouteClaim extends Claim {
  /** The cached route, which keeps the handler's mean run time. */
  cached: Route | null;
}

/** Runs a handler whose request claimed its key, and records its outcome under the claim. */
export class ClaimedHandler {
  constructor(
    private readonly calls: StoreCalls,
    private readonly recorder: OutcomeRecorder,
    private readonly logger: Logger,
  ) {}

  /**
   * Runs the handler under the claim, subscribed here rather than by the caller: if the caller
   * goes away (client disconnect, a timeout interceptor), the handler still runs to its end and
   * its outcome is still recorded, so a retry never runs it a second time concurrently. Exactly
   * one of complete / release happens, and the values are passed on only after it, so the
   * response leaves after the completion write (and a stream reaches the caller once it ends).
   */
  run(
    context: ExecutionContext,
    next: CallHandler,
    adapter: IdempotencyContextAdapter,
    claim: RouteClaim,
  ): Observable<unknown> {
    const stopHeartbeat = this.calls.heartbeat(claim);
    const started = performance.now();
    const values: unknown[] = [];
    const outcome = new Promise<unknown[]>((resolve, reject) => {
      const fail = (error: unknown) => {
        stopHeartbeat();
        timeRun(claim.cached, started);
        // A timeout interceptor inside this one gave up waiting, but the handler may run on:
        // the claim stays until its lease runs out, so a retry cannot run it a second time now.
        if (isTimeout(error)) {
          this.logger.warn(
            `${claim.handler}: timed out; ${claim.key} stays claimed until its lease runs out`,
          );
          reject(error);
          return;
        }
        // An error the route stores (`storeErrors`) is an outcome; any other frees the key.
        void this.recorder
          .error(context, adapter, claim, error)
          .then((stored) => (stored ? undefined : this.calls.release(claim, error)))
          .then(() => reject(error));
      };
      try {
        next.handle().subscribe({
          next: (value) => values.push(value),
          error: fail,
          complete: () => {
            stopHeartbeat();
            timeRun(claim.cached, started);
            void this.recorder.success(context, adapter, claim, values).then(() => resolve(values));
          },
        });
      } catch (error) {
        fail(error);
      }
    });
    // Nobody may be listening any more when the handler fails: that must not be unhandled.
    outcome.catch(() => {});
    return new Observable((subscriber) => {
      outcome.then(
        (emitted) => {
          for (const value of emitted) subscriber.next(value);
          subscriber.complete();
        },
        (error: unknown) => {
          // What the handler emitted before failing still reaches the caller, as without us.
          for (const value of values) subscriber.next(value);
          subscriber.error(error);
        },
      );
    });
  }
}

/** An error of a timeout interceptor: rxjs `timeout()` or Nest's RequestTimeoutException (408). */
function isTimeout(error: unknown): boolean {
  return (
    error instanceof RequestTimeoutException ||
    (error instanceof Error && error.name === 'TimeoutError')
  );
}
