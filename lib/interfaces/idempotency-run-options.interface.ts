import type { IdempotencyErrorMatcher } from './idempotency-options.interface';

/** What `IdempotencyService.run()` accepts as a key: a string, or an integer (a job or row id). */
export type IdempotencyRunKey = string | number | bigint;

/**
 * Options of `IdempotencyService.run()` and `@IdempotentMethod()`. Every option left out takes the
 * module's value from `forRoot()` (`ttl`, `lockTtl`, `storeTimeout`, `waitTimeout`, `keyPrefix`,
 * `maxKeyLength`, `maxResponseBytes`, `compression`, `onEvent`, `resumable`), except
 * `onConflict`, `storeErrors` and `transactional`, whose defaults below are run()'s own.
 */
export interface IdempotencyRunOptions {
  /**
   * What the key is unique within, e.g. `'send-invoice'` or a queue's name: the same key in two
   * scopes names two records. Records of run() live apart from every HTTP route's and message
   * handler's records, whatever the scope. Default: `'default'`.
   */
  scope?: string;
  /**
   * A value identifying the work (the job's payload, some of its fields): hashed and stored with
   * the claim; a later call with the same key and another fingerprint throws
   * `IdempotencyKeyReusedError` instead of replaying an unrelated result. Default: none (no check).
   */
  fingerprint?: unknown;
  /**
   * What a call gets while another call with its key is running (in this process or another):
   * `'wait'` waits for that one to finish and then returns its stored result (or runs `fn` itself
   * when that one failed or its process died); `'reject'` throws `IdempotencyInProgressError` at
   * once. Default: `'wait'`.
   */
  onConflict?: 'wait' | 'reject';
  /**
   * Longest a call waits with `onConflict: 'wait'`, in milliseconds, before it throws
   * `IdempotencyInProgressError`. Default: the module's `waitTimeout` (10 000).
   */
  waitTimeout?: number;
  /**
   * The lease, in milliseconds: renewed every third of it while `fn` runs (heartbeat); when the
   * process dies, the key can be claimed again after at most this long. Default: the module's
   * `lockTtl` (30 000).
   */
  lockTtl?: number;
  /** How long the result is kept and returned to later calls, in milliseconds. Default: the module's `ttl` (24 h). */
  ttl?: number;
  /**
   * Errors of `fn` stored as its outcome instead of releasing the key: later calls throw an
   * equivalent error (same class when the class is listed, same message and fields) without
   * running `fn`. Entries: an exception class (`instanceof`), a predicate `(error) => boolean`,
   * or an HTTP status (`402`, `'4xx'`) for `HttpException`s. Default: `[]` (every error releases
   * the key, so the next call runs `fn` again).
   */
  storeErrors?: IdempotencyErrorMatcher[];
  /**
   * Runs `fn` inside the app's database transaction (`@nestjs-cls/transactional`'s
   * `TransactionHost`; `{ connectionName }` picks a named one) and writes the result in that
   * transaction: `fn`'s writes through `txHost.tx` and the record commit together or not at all.
   * Needs the PostgreSQL or MySQL store on the database `fn` writes to. Default: false.
   */
  transactional?: boolean | { connectionName?: string };
  /**
   * Lets `fn` resume where an earlier call with the key stopped: each
   * `IdempotencyService.step(name, fn)` it calls runs once per key, and a later call (after `fn`
   * threw, or its process died) returns the recorded results of the steps that finished and
   * runs from the first that did not. With `transactional`, one transaction per step instead of
   * one around `fn`. Needs a store that records steps. See docs/steps.md. Default: the module's
   * `resumable` (false).
   */
  resumable?: boolean;
}

/** Options of `IdempotencyService.step()`. */
export interface IdempotencyStepOptions {
  /**
   * Runs the step's function and writes its record in one transaction of the app's
   * `TransactionHost` (`{ connectionName }` picks a named one): its writes through `txHost.tx`
   * and its record commit together, or roll back together. `false` runs the step outside any
   * transaction: for a step that calls a network API, which must not hold a transaction open.
   * Default: the `transactional` option of the route or run().
   */
  transactional?: boolean | { connectionName?: string };
}

/** Options of `@IdempotentMethod()`: run()'s, with the key and fingerprint read from the arguments. */
export interface IdempotentMethodOptions<A extends unknown[]> extends Omit<
  IdempotencyRunOptions,
  'fingerprint'
> {
  /** The key of a call, from its arguments (a job's id, an event's id...). */
  key: (...args: A) => IdempotencyRunKey;
  /** What identifies the work, from the arguments (see {@link IdempotencyRunOptions.fingerprint}). */
  fingerprint?: (...args: A) => unknown;
}
