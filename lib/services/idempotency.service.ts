import {
  BeforeApplicationShutdown,
  HttpException,
  Inject,
  Injectable,
  Logger,
  Optional,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { captureError, captureValue, replayValue } from '../adapters/value-outcome';
import { ClaimCore } from '../core/claim-core';
import { describe } from '../core/outcome-events';
import { ownerToken, recordKey, RUN_SPACE, runKeyText } from '../core/record-key';
import type { Claim } from '../core/store-calls';
import { stepStoreProblem } from '../core/step-store-checks';
import { runStep } from '../core/steps';
import { transactionalStoreProblem } from '../core/transactions';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type {
  IdempotencyRunKey,
  IdempotencyRunOptions,
  IdempotencyStepOptions,
} from '../interfaces/idempotency-run-options.interface';
import {
  NO_OVERRIDES,
  resolveRunOptions,
  type ResolvedModuleOptions,
  type ResolvedRunOptions,
  type RunOverrides,
} from '../options';
import { IdempotencyStore } from '../stores/idempotency.store';
import { errorStatus } from '../utils/error-codec';
import { fingerprint } from '../utils/fingerprint';

/** The most a fingerprint value may hash, in characters of its canonical form (1 MiB). */
const MAX_FINGERPRINT = 1024 * 1024;

/**
 * Runs any function at most once per key, with the guarantees of `@Idempotent()` routes and the
 * same store, through the same claim core: for queue jobs, cron ticks, outbox relays and service
 * methods, where Nest runs no interceptor. See docs/jobs.md.
 *
 * @example
 * ```ts
 * const receipt = await idempotency.run(`charge:${order.id}`, () => payments.charge(order), {
 *   scope: 'orders',
 * });
 * ```
 */
@Injectable()
export class IdempotencyService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private readonly core: ClaimCore;
  /** run()'s options for the calls that override none of the module's (see optionsOf). */
  private runDefaults?: ResolvedIdempotencyOptions;

  constructor(
    private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    @Optional() moduleRef?: ModuleRef,
  ) {
    this.core = new ClaimCore(store, options, this.logger, moduleRef);
  }

  /** Stops renewing leases at `app.close()`, as the interceptor does (see `maxLockHold`). */
  beforeApplicationShutdown(): void {
    this.core.close();
  }

  /**
   * Runs `fn` once per `key` (within `options.scope`) and returns its result; a later call with
   * the key returns the stored result without running `fn` (until `ttl`). Results round-trip
   * JSON values, `Date`, `bigint`, `Buffer`, `Map`, `Set` and `undefined`.
   *
   * While `fn` runs, the key is leased to this call (renewed by a heartbeat, fenced by an owner
   * token): a concurrent call waits for the outcome or throws `IdempotencyInProgressError`
   * (`onConflict`). When `fn` throws, the key is released (or the error stored, `storeErrors`)
   * and the error rethrown. A call whose lease was taken over meanwhile (its process stalled past
   * `lockTtl`) cannot overwrite the new owner's result: it returns its own value unstored, or
   * with `transactional` its transaction rolls back and it throws `IdempotencyInProgressError`.
   *
   * With `resumable`, `fn` may call {@link step}: a call after `fn` failed (or its process died)
   * returns the recorded results of the steps that finished and runs from the first that did
   * not; with `transactional` too, each step runs in its own transaction and `fn` in none.
   *
   * Throws `IdempotencyKeyInvalidError` (bad key), `IdempotencyKeyReusedError` (fingerprint
   * mismatch), `IdempotencyInProgressError`, `IdempotencyStoreUnavailableError` (the store did
   * not answer: `fn` did not run; or, with `transactional`, the record could not be written and
   * `fn`'s writes were rolled back), or what `fn` throws.
   */
  async run<T>(
    key: IdempotencyRunKey,
    fn: () => T | Promise<T>,
    options?: IdempotencyRunOptions,
  ): Promise<Awaited<T>> {
    const run = resolveRunOptions(options, 'IdempotencyService.run');
    const claim = this.claimOf(key, run);
    const request = {
      token: claim.token,
      fingerprint: this.fingerprintOf(run.fingerprint),
      leaseMs: claim.options.lockTtl,
    };
    const { storeErrors } = claim.options;
    const answer = await this.core.claim(claim, request);
    if (answer.status === 'completed') {
      return replayValue(answer.snapshot, storeErrors, rebuildHttpException) as Awaited<T>;
    }
    const work = async (): Promise<Awaited<T>> => await fn();
    return this.core.execute<Awaited<T>>(claim, {
      run: work,
      capture: captureValue,
      errorStatus,
      captureError: (error) => captureError(error, 'http', storeErrors),
      refuse: (error) => error,
    });
  }

  /**
   * A step of a resumable handler or run(): runs `fn` once per request and records its result
   * under the claim (fenced by the owner token); when the same request runs again (a retry
   * after a crash, after its claim was released, after its lease was taken over), a step
   * recorded before returns its recorded result without running `fn`, and the run goes on from
   * the first step not recorded. Results round-trip as run()'s do (JSON values, `Date`, `bigint`,
   * `Buffer`, `Map`, `Set`, `undefined`; sealed with `encryption`).
   *
   * Steps are numbered in the order step() is called (at the call, so steps started together
   * with `Promise.all` are numbered in the order of the calls); a step recorded under another
   * name at a step's place fails the run with `IdempotencyStepMismatchError` (the code changed).
   * Keep the steps of a request the same, in the same order, on every run: see docs/steps.md.
   * Inside a step, `derivedIdempotencyKey()` and `propagateKeys` derive keys from the step.
   *
   * With `transactional` (the route's or run()'s, or `options.transactional`), `fn`'s writes
   * through the app's `TransactionHost` and the step's record commit in one transaction. Without
   * it, the record is written after `fn` returns: a crash in between runs the step again.
   *
   * Rejects outside a claimed handler or run() that is `resumable`, inside another step, when
   * `fn`'s result cannot be stored (after `fn` ran), and with the run's refusal when the step
   * cannot be recorded: `IdempotencyInProgressError` when the run lost its key to another
   * (fenced), `IdempotencyStoreUnavailableError` when the store failed.
   *
   * @example
   * ```ts
   * const order = await idempotency.step('order', () => orders.insert(dto));
   * const charge = await idempotency.step('charge', () => payments.charge(order));
   * ```
   */
  step<T>(
    name: string,
    fn: () => T | Promise<T>,
    options?: IdempotencyStepOptions,
  ): Promise<Awaited<T>> {
    return runStep(name, fn, options);
  }

  /** The claim of a call: its store key, a new owner token and its options over the module's. */
  private claimOf(key: IdempotencyRunKey, { scope, overrides }: ResolvedRunOptions): Claim {
    const options = this.optionsOf(overrides);
    const space = RUN_SPACE + scope;
    const text = runKeyText(key, options.maxKeyLength);
    return {
      key: recordKey(options.keyPrefix, space, text),
      token: ownerToken(),
      options,
      handler: space,
      route: space,
      scope: space,
      clientKey: text,
    };
  }

  /**
   * run()'s options: the module's, with run()'s own defaults, and the call's overrides over
   * them; made once for the calls that override none (read only, as every claim's options).
   */
  private optionsOf(overrides: RunOverrides): ResolvedIdempotencyOptions {
    if (overrides === NO_OVERRIDES && this.runDefaults) return this.runDefaults;
    const options: ResolvedIdempotencyOptions = {
      ...this.options,
      onConflict: 'wait',
      storeErrors: [],
      transactional: false,
      failOpen: false,
      ...overrides,
    };
    const problem =
      (options.transactional && transactionalStoreProblem(this.store)) ||
      (options.resumable && stepStoreProblem(this.store, options.transactional));
    if (problem) throw new TypeError(`IdempotencyService.run: ${problem}`);
    if (overrides === NO_OVERRIDES) this.runDefaults = options;
    return options;
  }

  private fingerprintOf(value: unknown): string {
    if (value === undefined) return '';
    try {
      return fingerprint([RUN_SPACE], value, MAX_FINGERPRINT);
    } catch (error) {
      throw new IdempotencyKeyInvalidError(
        `The fingerprint cannot be hashed (${describe(error)}).`,
        { cause: error },
      );
    }
  }
}

/** A stored error of `fn` that is not of a listed class comes back as the HttpException it was. */
function rebuildHttpException(stored: { r?: unknown }, status = 500): Error {
  return new HttpException(stored.r as string | Record<string, unknown>, status);
}
