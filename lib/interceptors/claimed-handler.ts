import { CallHandler, ExecutionContext, Logger, RequestTimeoutException } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { defer, Observable } from 'rxjs';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import {
  IdempotencyInProgressError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { runClaimed } from '../propagation/run-claimed';
import { queryableTransaction } from '../stores/sql/orm-transactions';
import { loadPeer } from '../utils/load-optional';
import type { CompletionWrite, OutcomeRecorder } from '../core/outcome-recorder';
import { type Route, timeRun } from './route-resolver';
import type { Claim, StoreCalls } from '../core/store-calls';

/** A claim and the route it was made on (none when a subclass made the route idempotent). */
export interface RouteClaim extends Claim {
  /** The cached route, which keeps the handler's mean run time. */
  cached: Route | null;
}

/** The part of `@nestjs-cls/transactional`'s TransactionHost used here. */
export interface TransactionHost {
  readonly tx: unknown;
  withTransaction<R>(fn: () => Promise<R>): Promise<R>;
}

/** How long a client whose transaction was rolled back is told to wait, in ms (Retry-After). */
const ROLLED_BACK_RETRY_AFTER_MS = 1_000;

/** Thrown inside the app's transaction to roll it back; never leaves this file. */
class RollBack extends Error {
  /**
   * @param answer what the client gets instead
   * @param release whether to give the claim up after the rollback (not when it was fenced:
   *   the key is another request's then)
   */
  constructor(
    readonly answer: Error,
    readonly release: boolean,
  ) {
    super('rolled back');
  }
}

/** Runs a handler whose request claimed its key, and records its outcome under the claim. */
export class ClaimedHandler {
  /** The app's TransactionHost per connection name (`transactional`), looked up once. */
  private readonly hosts = new Map<string | undefined, TransactionHost>();

  constructor(
    private readonly calls: StoreCalls,
    private readonly recorder: OutcomeRecorder,
    private readonly logger: Logger,
    private readonly moduleRef?: ModuleRef,
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
    handled: () => void,
  ): Observable<unknown> {
    const values: unknown[] = [];
    // Renewed until the outcome is stored or released, not only while the handler runs: with a
    // slow completion write, a lapsed lease would let a duplicate run the handler again.
    const stopHeartbeat = this.calls.heartbeat(claim);
    const outcome = this.execute(context, next, adapter, claim, values, handled);
    return emitWhenSettled(outcome.finally(stopHeartbeat), values);
  }

  /**
   * The handler of a request that runs without a claim (no key, or `failOpen`): in the app's
   * transaction all the same on a `transactional` route, so a client cannot opt out of it.
   */
  unclaimed(next: CallHandler, options: ResolvedIdempotencyOptions): Observable<unknown> {
    const { transactional } = options;
    if (!transactional) return next.handle();
    const host = this.transactionHost(transactional);
    return defer(() => {
      const values: unknown[] = [];
      return emitWhenSettled(
        host.withTransaction(() => collect(next.handle(), values)),
        values,
      );
    });
  }

  private transactionHost(option: true | { connectionName?: string }): TransactionHost {
    const name = option === true ? undefined : option.connectionName;
    let host = this.hosts.get(name);
    if (!host) this.hosts.set(name, (host = transactionHost(this.moduleRef, option)));
    return host;
  }

  /**
   * Runs the handler (in the app's transaction with `transactional`) and records its outcome.
   * `handled` is called once the handler (and the interceptors inside this one) completed or
   * failed.
   */
  private async execute(
    context: ExecutionContext,
    next: CallHandler,
    adapter: IdempotencyContextAdapter,
    claim: RouteClaim,
    values: unknown[],
    handled: () => void,
  ): Promise<void> {
    const started = performance.now();
    let running = true;
    /** The handler settled (or its transaction failed to begin): once, whichever path. */
    const ran = () => {
      if (!running) return;
      running = false;
      handled();
      timeRun(claim.cached, started);
    };
    const { transactional } = claim.options;
    // In the claim's async context: derivedIdempotencyKey() and propagateKeys work in the handler.
    const handle = () => runClaimed(claim.key, claim.options, () => collect(next.handle(), values));
    try {
      if (!transactional) {
        await handle();
        ran();
        await this.recorder.success(context, adapter, claim, values);
        return;
      }
      const host = this.transactionHost(transactional);
      // The completion is written through the transaction, fenced by the owner token: the
      // handler's writes and the record commit together, or roll back together.
      await host.withTransaction(async () => {
        await handle();
        ran();
        const write: CompletionWrite = (owner, response) =>
          this.calls.completeInTransaction(queryableTransaction(host.tx), owner, response);
        let outcome;
        try {
          outcome = await this.recorder.success(context, adapter, claim, values, write);
        } catch (error) {
          const retry = ROLLED_BACK_RETRY_AFTER_MS;
          const unavailable = new IdempotencyStoreUnavailableError(retry, { cause: error });
          throw new RollBack(adapter.toException(context, unavailable, claim.options), true);
        }
        if (outcome === 'fenced') {
          // Another request took the key over: a retry gets its outcome.
          const busy = new IdempotencyInProgressError(ROLLED_BACK_RETRY_AFTER_MS);
          throw new RollBack(adapter.toException(context, busy, claim.options), false);
        }
        // Committed without a record, a retry would run it again: roll back instead (500).
        if (outcome === 'released') throw new RollBack(new NotStoredError(claim.handler), true);
      });
      this.recorder.committed(claim);
    } catch (error) {
      ran();
      if (error instanceof RollBack) {
        values.length = 0; // what was emitted was rolled back: none of it is sent
        if (error.release) await this.calls.release(claim, error.answer);
        throw error.answer;
      }
      // A timeout interceptor inside this one gave up waiting, but the handler may run on:
      // the claim stays until its lease runs out, so a retry cannot run it a second time now.
      if (isTimeout(error)) {
        this.logger.warn(
          `${claim.handler}: timed out; ${claim.key} stays claimed until its lease runs out`,
        );
        throw error;
      }
      // An error the route stores (`storeErrors`) is an outcome; any other frees the key.
      if (!(await this.recorder.error(context, adapter, claim, error))) {
        await this.calls.release(claim, error);
      }
      throw error;
    }
  }
}

/** The error a transactional request whose response cannot be stored fails with (500). */
class NotStoredError extends Error {
  constructor(handler: string) {
    super(
      `${handler}: the response cannot be stored (see the warning logged), so the transaction ` +
        'was rolled back rather than committed without a record a retry would find',
    );
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

let hostToken: ((connectionName?: string) => unknown) | undefined;

/** The app's TransactionHost (`@nestjs-cls/transactional`) of a connection, from its container. */
export function transactionHost(
  moduleRef: ModuleRef | undefined,
  option: true | { connectionName?: string },
): TransactionHost {
  hostToken ??= loadPeer<{ getTransactionHostToken: typeof hostToken }>(
    '@nestjs-cls/transactional',
    'the `transactional` option',
  ).getTransactionHostToken;
  if (!moduleRef) throw new Error('no ModuleRef to find the TransactionHost in');
  const token = hostToken!(option === true ? undefined : option.connectionName);
  return moduleRef.get<unknown, TransactionHost>(token as string, { strict: false });
}

/**
 * Fails at boot when a route asks for `transactional` (`options` of the module, controllers or
 * handlers) and the store cannot write inside the app's transaction, or the app registered no
 * TransactionHost for it: misconfigured, such a route could never keep its promise.
 */
export function assertTransactionalReady(
  wanted: (true | { connectionName?: string })[],
  store: object,
  moduleRef: ModuleRef,
): void {
  if (wanted.length === 0) return;
  if (typeof (store as { completeInTransaction?: unknown }).completeInTransaction !== 'function') {
    throw new Error(
      `IdempotencyModule: \`transactional\` needs a store that writes in the app's transaction ` +
        `(the PostgreSQL or MySQL store: forRoot({ postgres }) or forRoot({ mysql })); ${store.constructor.name} cannot`,
    );
  }
  for (const option of wanted) {
    try {
      transactionHost(moduleRef, option);
    } catch (error) {
      throw new Error(
        `IdempotencyModule: \`transactional\` needs @nestjs-cls/transactional's TransactionHost` +
          (option === true || !option.connectionName ? '' : ` "${option.connectionName}"`) +
          ` (register ClsModule with ClsPluginTransactional): ${(error as Error).message}`,
        { cause: error },
      );
    }
  }
}

/** An error of a timeout interceptor: rxjs `timeout()` or Nest's RequestTimeoutException (408). */
function isTimeout(error: unknown): boolean {
  return (
    error instanceof RequestTimeoutException ||
    (error instanceof Error && error.name === 'TimeoutError')
  );
}
