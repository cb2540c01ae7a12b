import { HttpException, Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import {
  IdempotencyInProgressError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyReusedError,
  IdempotencyRecordUnreadableError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import { transactionHost, type TransactionHost } from '../interceptors/claimed-handler';
import { describe, OutcomeEvents } from '../core/outcome-events';
import { OutcomeWaiter } from '../core/outcome-waiter';
import { isPromise } from '../interceptors/request-identity';
import { type Claim, StoreCalls } from '../core/store-calls';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type {
  IdempotencyRunKey,
  IdempotencyRunOptions,
} from '../interfaces/idempotency-run-options.interface';
import { createOpenTelemetryMetrics } from '../observability/metrics';
import { ClaimRequest, ClaimResult, IdempotencyStore } from '../stores/idempotency.store';
import type { StoredResponse } from '../stores/idempotency.store';
import {
  describeError,
  errorStatus,
  matchesStoredErrors,
  rebuildError,
} from '../utils/error-codec';
import { fingerprint } from '../utils/fingerprint';
import { ownerToken, recordKey } from '../utils/key';
import { validateOptions, type ResolvedModuleOptions } from '../options/options';
import { decodeResponse, encodeResponse, packResponse } from '../utils/response-codec';
import { RecordCipher } from '../utils/encryption';
import { runClaimed } from '../propagation/run-claimed';
import type { StoredError } from '../utils/error-codec';
import { decodeValue, encodeValue } from '../utils/value-codec';

/** What every run() record's scope starts with: no HTTP route or message handler's can. */
const RUN_SPACE = 'run:';
/** How long a caller is told to wait after a rolled-back transaction or a store outage, in ms. */
const RETRY_AFTER_MS = 1_000;
/** The most a fingerprint value may hash, in characters of its canonical form (1 MiB). */
const MAX_FINGERPRINT = 1024 * 1024;

/** Writes a completion; resolves whether the claim still owned the key. */
type Write = (response: StoredResponse) => Promise<boolean>;

/** Thrown inside the app's transaction to roll it back; never leaves this file. */
class RollBack extends Error {
  constructor(
    readonly answer: Error,
    readonly release: boolean,
  ) {
    super('rolled back');
  }
}

/**
 * Runs any function at most once per key, with the guarantees of `@Idempotent()` routes and the
 * same store: for queue jobs, cron ticks, outbox relays and service methods, where Nest runs no
 * interceptor. See docs/jobs.md.
 *
 * @example
 * ```ts
 * const receipt = await idempotency.run(`charge:${order.id}`, () => payments.charge(order), {
 *   scope: 'orders',
 * });
 * ```
 */
@Injectable()
export class IdempotencyService {
  private readonly logger = new Logger('Idempotency');
  private readonly events: OutcomeEvents;
  private readonly calls: StoreCalls;
  private readonly waiter: OutcomeWaiter;
  /** Seals stored results (option `encryption`), as the interceptor does. */
  private readonly cipher?: RecordCipher;
  /** The app's TransactionHost per connection name (`transactional`), looked up once. */
  private readonly hosts = new Map<string | undefined, TransactionHost>();

  constructor(
    private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
    @Optional() private readonly moduleRef?: ModuleRef,
  ) {
    const metrics = options.metrics === false ? undefined : createOpenTelemetryMetrics();
    this.events = new OutcomeEvents(this.logger, metrics);
    this.calls = new StoreCalls(store, this.events, this.logger);
    this.waiter = new OutcomeWaiter(this.calls, this.events, this.logger);
    if (options.encryption) this.cipher = new RecordCipher(options.encryption);
  }

  /** Stops renewing leases at `app.close()`, as the interceptor does (see `maxLockHold`). */
  beforeApplicationShutdown(): void {
    this.calls.close();
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
   * Throws `IdempotencyKeyInvalidError` (bad key), `IdempotencyKeyReusedError` (fingerprint
   * mismatch), `IdempotencyInProgressError`, `IdempotencyStoreUnavailableError` (the store did
   * not answer: `fn` did not run), or what `fn` throws.
   */
  async run<T>(
    key: IdempotencyRunKey,
    fn: () => T | Promise<T>,
    options: IdempotencyRunOptions = {},
  ): Promise<Awaited<T>> {
    const claim = this.claimOf(key, options);
    const request: ClaimRequest = {
      token: claim.token,
      fingerprint: this.fingerprintOf(options.fingerprint),
      leaseMs: claim.options.lockTtl,
    };
    let result: ClaimResult;
    try {
      result = await this.calls.claim(claim, request);
    } catch (error) {
      this.events.emit(claim, 'store_error', claim.key, error);
      throw new IdempotencyStoreUnavailableError(RETRY_AFTER_MS, { cause: error });
    }
    if (result.status === 'in_progress' && claim.options.onConflict === 'wait') {
      result = await this.waiter.wait(claim, request, result);
    }
    switch (result.status) {
      case 'completed':
        this.events.emit(claim, 'replayed', claim.key);
        return this.replay<Awaited<T>>(claim, result.response);
      case 'in_progress':
        this.events.emit(claim, 'conflict', claim.key);
        throw new IdempotencyInProgressError(result.retryAfterMs);
      case 'key_reused':
        this.events.emit(claim, 'key_reused', claim.key);
        throw new IdempotencyKeyReusedError();
    }
    this.events.emit(claim, 'claimed', claim.key);
    return this.execute(claim, fn);
  }

  /** The claim of a call: its store key, a new owner token and its options over the module's. */
  private claimOf(key: IdempotencyRunKey, run: IdempotencyRunOptions): Claim {
    const { scope = 'default', onConflict, waitTimeout, lockTtl, ttl, storeErrors } = run;
    const overrides = {
      onConflict,
      waitTimeout,
      lockTtl,
      ttl,
      storeErrors,
      transactional: run.transactional,
    };
    if (typeof scope !== 'string' || scope === '') {
      throw new TypeError('IdempotencyService.run: scope must be a non-empty string');
    }
    validateOptions(overrides, `IdempotencyService.run (${scope})`);
    const options: ResolvedIdempotencyOptions = {
      ...this.options,
      onConflict: 'wait',
      storeErrors: [],
      transactional: false,
      ...definedOnly(overrides),
    };
    if (options.transactional && !('completeInTransaction' in this.store)) {
      throw new TypeError(
        `IdempotencyService.run: \`transactional\` needs a store that writes in the app's ` +
          `transaction (the PostgreSQL store); ${this.store.constructor.name} cannot`,
      );
    }
    const space = RUN_SPACE + scope;
    const text = keyText(key, options.maxKeyLength);
    return {
      key: recordKey(options.keyPrefix, space, text),
      token: ownerToken(),
      options,
      handler: space,
      route: space,
    };
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

  /**
   * Runs `fn` under the claim and records its outcome: exactly one of complete or release
   * happens. `fn` is called in one place only, {@link attempt}.
   */
  private async execute<T>(claim: Claim, fn: () => T | Promise<T>): Promise<Awaited<T>> {
    const stopHeartbeat = this.calls.heartbeat(claim);
    const { transactional } = claim.options;
    const attempt = async (write?: Write): Promise<Awaited<T>> => {
      // The one place fn runs, in the claim's async context: derivedIdempotencyKey() and
      // propagateKeys work inside it as in a claimed handler.
      const value = await runClaimed(claim.key, claim.options, fn);
      const outcome = await this.record(claim, {}, value, write);
      if (write && outcome === 'fenced') {
        // Another call took the key over: its result is the one kept, this one rolls back.
        throw new RollBack(new IdempotencyInProgressError(RETRY_AFTER_MS), false);
      }
      if (write && outcome === 'unstorable') {
        const reason = `${claim.handler}: the result cannot be stored, so the transaction was rolled back`;
        throw new RollBack(new Error(reason), true);
      }
      return value;
    };
    try {
      if (!transactional) return await attempt();
      const host = this.transactionHost(transactional);
      // The completion goes through the app's transaction, fenced by the owner token: fn's
      // writes and the record commit together or roll back together.
      const value = await host.withTransaction(() =>
        attempt((response) => this.calls.completeInTransaction(host.tx, claim, response)),
      );
      this.events.emit(claim, 'completed', claim.key);
      return value;
    } catch (error) {
      if (error instanceof RollBack) {
        if (error.release) await this.calls.release(claim, error.answer);
        throw error.answer;
      }
      if (!(await this.storeError(claim, error))) await this.calls.release(claim, error);
      throw error;
    } finally {
      stopHeartbeat();
    }
  }

  /**
   * Stores `fn`'s error when `storeErrors` match it (outside any transaction: that rolled
   * back). @returns false when they do not, or it cannot be stored: the caller releases the key.
   */
  private async storeError(claim: Claim, error: unknown): Promise<boolean> {
    const { storeErrors } = claim.options;
    if (storeErrors.length === 0) return false;
    if (!matchesStoredErrors(storeErrors, error, undefined as never, errorStatus(error))) {
      return false;
    }
    const described = describeError(error, 'http', storeErrors);
    const status = error instanceof HttpException ? error.getStatus() : undefined;
    const outcome = await this.record(claim, { status, error: true }, described);
    return outcome !== 'unstorable';
  }

  /**
   * Encodes and stores an outcome. A transaction's `write` failing is thrown (the transaction
   * rolls back); without one, a failure is logged and the key stays claimed until its lease
   * runs out. An outcome that cannot be stored (a cycle, over `maxResponseBytes`) is released
   * here without a transaction, by the caller after its rollback with one.
   */
  private async record(
    claim: Claim,
    kind: { status?: number; error?: true },
    value: unknown,
    write?: Write,
  ): Promise<'stored' | 'fenced' | 'unstorable' | 'failed'> {
    const { options, handler, key } = claim;
    let response: StoredResponse | PromiseLike<StoredResponse>;
    try {
      const text = encodeValue(value);
      const encoded = encodeResponse({ value: text, status: kind.status, error: kind.error });
      if (encoded.body.length > options.maxResponseBytes) {
        throw new Error(`${encoded.body.length} bytes, over maxResponseBytes`);
      }
      const sealing = this.cipher && { cipher: this.cipher, context: key };
      response = packResponse(encoded, options.compression, sealing);
      if (isPromise(response)) response = await response;
    } catch (error) {
      this.events.emit(claim, 'not_replayable', key);
      this.events.warnOnce(handler, `a result was not stored: ${describe(error)}`, 'unstorable');
      if (!write) await this.calls.release(claim);
      return 'unstorable';
    }
    let owned: boolean;
    try {
      owned = await (write ? write(response) : this.calls.complete(claim, response));
    } catch (error) {
      this.events.emit(claim, 'completion_failed', key, error);
      if (write) throw error;
      this.logger.error(
        `${handler}: storing the result for ${key} failed (${describe(error)}); a call after the lease may run it again`,
      );
      return 'failed';
    }
    if (owned) {
      if (!write) this.events.emit(claim, 'completed', key);
      return 'stored';
    }
    this.events.emit(claim, 'fenced', key);
    this.logger.warn(`${handler}: ran past its lease on ${key}, taken over since; not stored`);
    return 'fenced';
  }

  /** A stored outcome: the result, or the stored error thrown again. */
  private async replay<T>(claim: Claim, stored: StoredResponse): Promise<T> {
    const { options } = claim;
    let snapshot;
    try {
      snapshot = decodeResponse(stored, this.cipher && { cipher: this.cipher, context: claim.key });
      if (isPromise(snapshot)) snapshot = await snapshot;
    } catch (error) {
      // Sealed with a key no longer set, or altered: never returned as garbage, never re-run.
      this.events.warnOnce(
        claim.handler,
        `a stored result cannot be read (${describe(error)})`,
        'unreadable',
      );
      throw new IdempotencyRecordUnreadableError({ cause: error });
    }
    const value = decodeValue(snapshot.value as string);
    if (!snapshot.error) return value as T;
    const status = snapshot.status ?? 500;
    throw rebuildError(value as StoredError, options.storeErrors, (error) => {
      return new HttpException(error.r as string | Record<string, unknown>, status);
    });
  }

  private transactionHost(option: true | { connectionName?: string }): TransactionHost {
    const name = option === true ? undefined : option.connectionName;
    let host = this.hosts.get(name);
    if (!host) this.hosts.set(name, (host = transactionHost(this.moduleRef, option)));
    return host;
  }
}

/** The key as text: a non-empty string of at most `maxLength` characters, or an integer. */
function keyText(key: unknown, maxLength: number): string {
  if ((typeof key === 'number' && Number.isSafeInteger(key)) || typeof key === 'bigint') {
    return String(key);
  }
  if (typeof key !== 'string' || key === '' || key.length > maxLength) {
    throw new IdempotencyKeyInvalidError(
      `The idempotency key must be a string of 1 to ${maxLength} characters or an integer.`,
    );
  }
  return key;
}

/** The fields of `options` that are set: an explicit `undefined` keeps the module's value. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(options).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}
