import type { Logger } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import {
  type IdempotencyError,
  IdempotencyInProgressError,
  IdempotencyKeyReusedError,
  IdempotencyStepMismatchError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { createOpenTelemetryMetrics } from '../observability/metrics';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedModuleOptions } from '../options';
import { inUnclaimedRun, noteClaimCore } from '../propagation/claim-context';
import { enterClaim } from '../propagation/run-claimed';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
} from '../stores/idempotency.store';
import { RecordCipher } from '../utils/encryption';
import type { ResponseSnapshot } from '../utils/response-codec';
import { describe, OutcomeEvents } from './outcome-events';
import { type Captured, type ErrorCapture, OutcomeRecorder } from './outcome-recorder';
import { OutcomeWaiter } from './outcome-waiter';
import { RecordLabels } from './record-label';
import { type ReplayCache, replayCacheOf } from './replay-cache';
import { ClaimSteps, type StepTools, StepNotRecordedError } from './steps';
import { type Claim, StoreCalls } from './store-calls';
import { Transactions } from './transactions';

/**
 * How long a caller is told to wait, in ms (Retry-After), after a store outage, or after its
 * transaction was rolled back because the store failed or another request took its key over.
 */
export const RETRY_AFTER_MS = 1_000;

/** What a claim gives its caller to do. */
export type ClaimAnswer =
  /** The caller owns the key: run the work through {@link ClaimCore.execute}. */
  | { status: 'claimed' }
  /** The key completed before: replay this outcome instead of running the work. */
  | { status: 'completed'; snapshot: ResponseSnapshot }
  /** The store failed and the route is `failOpen`: run the work unprotected. */
  | { status: 'unprotected' };

/** The work a claim protects, as an entry point (route, `run()`) describes it to the core. */
export interface ClaimedWork<T> extends ErrorCapture {
  /** Runs the handler or function; called once, in the claim's async context. */
  run(): Promise<T>;
  /** What to store of its result (may throw, or say why it cannot be stored). */
  capture(result: T): Captured | Promise<Captured>;
  /** What this entry point throws for a refusal (an HttpException, a GraphQLError...). */
  refuse(error: IdempotencyError): Error;
  /** Called once the work settled, before its outcome is recorded. */
  settled?(): void;
  /** What the work produced was rolled back with its transaction: none of it may be sent. */
  rolledBack?(): void;
  /**
   * Whether an error leaves the work running (a timeout interceptor gave up waiting for it): the
   * claim is then kept until its lease runs out rather than released, so a retry cannot run the
   * work a second time alongside it.
   */
  keepsClaim?(error: unknown): boolean;
}

/** Thrown inside the app's transaction to roll it back; never leaves this file. */
class RollBack extends Error {
  /**
   * @param answer what the caller gets instead
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

/** The error a transactional run whose outcome cannot be stored fails with (500 on HTTP). */
class NotStoredError extends Error {
  constructor(handler: string) {
    super(
      `${handler}: the outcome cannot be stored (see the warning logged), so the transaction ` +
        'was rolled back rather than committed without a record a retry would find',
    );
  }
}

/**
 * The claim path every entry point shares (`@Idempotent()` routes, resolvers, gRPC methods and
 * message handlers through the interceptor; `IdempotencyService.run()` and
 * `@IdempotentMethod()`): claim the key in one store round trip, wait or refuse while another
 * holds it, open a stored outcome; run the work under the claim (lease renewed, async context
 * for derived keys and steps, in the app's transaction with `transactional`, or one transaction
 * per step when `resumable`), then store its outcome, fenced by the owner token, or release the
 * claim. Exactly one of complete and release happens.
 */
export class ClaimCore {
  readonly events: OutcomeEvents;
  readonly calls: StoreCalls;
  readonly recorder: OutcomeRecorder;
  private readonly waiter: OutcomeWaiter;
  private readonly transactions: Transactions;
  /** Completed outcomes replayed without the store (option `localReplayCache`). */
  private readonly replays?: ReplayCache;
  /** What the steps of resumable runs use. */
  private readonly stepTools: StepTools;
  /** Builds each claim's label, when the store lists records (`IdempotencyRecords.list`). */
  private readonly labels?: RecordLabels;

  constructor(
    store: IdempotencyStore,
    options: Pick<
      ResolvedModuleOptions,
      'encryption' | 'metrics' | 'keyDerivationSecret' | 'localReplayCache'
    >,
    private readonly logger: Logger,
    moduleRef?: ModuleRef,
  ) {
    noteClaimCore(options.keyDerivationSecret);
    const metrics = options.metrics === false ? undefined : createOpenTelemetryMetrics();
    this.events = new OutcomeEvents(logger, metrics);
    this.calls = new StoreCalls(store, this.events, logger);
    this.waiter = new OutcomeWaiter(this.calls, this.events, logger);
    const cipher = options.encryption ? new RecordCipher(options.encryption) : undefined;
    this.recorder = new OutcomeRecorder(this.calls, this.events, logger, cipher);
    if (store.list) this.labels = new RecordLabels(cipher);
    this.transactions = new Transactions(moduleRef);
    this.replays = replayCacheOf(options);
    const { calls, events, transactions } = this;
    this.stepTools = { calls, events, logger, cipher, transactions, retryAfterMs: RETRY_AFTER_MS };
  }

  /**
   * Claims the key of `claim`. A duplicate still in progress waits (`onConflict: 'wait'`) or is
   * refused; so is a key reused with another fingerprint, and a store outage (fail closed)
   * unless the route is `failOpen`.
   *
   * @param request built for this call by the entry point: the core sets `resumable` and
   *   `about` (the record's label) on it
   * @param retryAfter how long a refused duplicate is told to wait, from the holder's lease left
   * @throws IdempotencyInProgressError, IdempotencyKeyReusedError,
   *   IdempotencyStoreUnavailableError, IdempotencyRecordUnreadableError
   */
  async claim(
    claim: Claim,
    request: ClaimRequest,
    retryAfter: (leaseLeftMs: number) => number = (ms) => ms,
  ): Promise<ClaimAnswer> {
    const { options, handler } = claim;
    const kept = this.replays?.get(claim.key, request.fingerprint);
    if (kept) return this.replay(claim, kept);
    const mark = this.replays?.mark() ?? 0;
    // Only a resumable claim reads the key's steps, and only a store that lists records keeps
    // a label: other claims cost what they did. Set on the entry point's own request, which is
    // the core's from here: a copy (object spread) cost 1.5 to 3 µs per claim.
    if (options.resumable) request.resumable = true;
    const about = this.labels?.about(claim);
    if (about) request.about = about;
    let result: ClaimResult;
    try {
      result = await this.calls.claim(claim, request);
    } catch (error) {
      this.events.emit(claim, 'store_error', claim.key, error);
      if (options.failOpen) {
        this.logger.warn(
          `${handler}: store failed (${describe(error)}); running unprotected (failOpen)`,
        );
        return { status: 'unprotected' };
      }
      this.logger.error(`${handler}: store failed (${describe(error)}); answering 503`);
      throw new IdempotencyStoreUnavailableError(RETRY_AFTER_MS, { cause: error });
    }
    if (result.status === 'in_progress' && options.onConflict === 'wait') {
      result = await this.waiter.wait(claim, request, result);
    }
    switch (result.status) {
      case 'completed':
        this.replays?.set(claim.key, request.fingerprint, result.response, mark);
        return this.replay(claim, result.response);
      case 'in_progress':
        this.events.emit(claim, 'conflict', claim.key);
        throw new IdempotencyInProgressError(retryAfter(result.retryAfterMs));
      case 'key_reused':
        this.events.emit(claim, 'key_reused', claim.key);
        throw new IdempotencyKeyReusedError();
    }
    this.events.emit(claim, 'claimed', claim.key);
    if (request.resumable) claim.steps = new ClaimSteps(this.stepTools, claim, result.steps);
    return { status: 'claimed' };
  }

  /** A completed outcome, opened for a replay. */
  private async replay(claim: Claim, stored: StoredResponse): Promise<ClaimAnswer> {
    const snapshot = await this.recorder.open(claim, stored);
    this.events.emit(claim, 'replayed', claim.key);
    return { status: 'completed', snapshot };
  }

  /**
   * Runs the work under its claim and records its outcome. The lease is renewed until the
   * outcome is stored or released, not only while the work runs: with a slow completion write,
   * a lapsed lease would let a duplicate run it again. Resolves with the work's result once the
   * outcome is recorded (committed, with `transactional`), or rejects with what the caller
   * answers: the work's error, or why its transaction was rolled back.
   */
  async execute<T>(claim: Claim, work: ClaimedWork<T>): Promise<T> {
    const stopHeartbeat = this.calls.heartbeat(claim);
    try {
      return await this.settle(claim, work);
    } finally {
      stopHeartbeat();
    }
  }

  /**
   * Runs work that has no claim (no key, or `failOpen` with the store down): in the app's
   * transaction all the same on a `transactional` route, so a caller cannot opt out of it; on a
   * `resumable` route, with its steps run as plain calls (nothing to record them under).
   */
  unclaimed<T>(
    { transactional, resumable }: Pick<ResolvedIdempotencyOptions, 'transactional' | 'resumable'>,
    run: () => Promise<T>,
  ): Promise<T> {
    const work = transactional
      ? () => this.transactions.host(transactional).withTransaction(run)
      : run;
    return resumable ? inUnclaimedRun(work) : work();
  }

  /** Stops renewing leases (application shutdown; see {@link StoreCalls.close}). */
  close(): void {
    this.calls.close();
  }

  private async settle<T>(claim: Claim, work: ClaimedWork<T>): Promise<T> {
    let running = true;
    /** The work settled (or its transaction failed to begin): once, whichever path. */
    const ran = () => {
      if (!running) return;
      running = false;
      work.settled?.();
    };
    const attempt = async (): Promise<T> => {
      try {
        // In the claim's async context: derivedIdempotencyKey(), propagateKeys and step() work
        // in it.
        return await enterClaim(claim.key, claim.options, () => work.run(), claim.steps);
      } finally {
        // Steps the handler left running (started beside one that failed) settle, and record
        // what they did, before the run's outcome is stored or its claim given up.
        await claim.steps?.idle();
        ran();
      }
    };
    const { transactional } = claim.options;
    try {
      // A resumable run is not wrapped in one transaction: each of its steps is (ClaimSteps).
      if (!transactional || claim.steps) {
        const result = await attempt();
        await this.recorder.success(claim, () => work.capture(result));
        return result;
      }
      // The completion is written through the app's transaction, fenced by the owner token:
      // the work's writes and the record commit together, or roll back together.
      const host = this.transactions.host(transactional);
      const result = await host.withTransaction(async () => {
        const result = await attempt();
        const outcome = await this.recorder
          .success(
            claim,
            () => work.capture(result),
            (owner, response) => this.calls.completeInTransaction(host.tx, owner, response),
          )
          .catch((error: unknown) => {
            const unavailable = new IdempotencyStoreUnavailableError(RETRY_AFTER_MS, {
              cause: error,
            });
            throw new RollBack(work.refuse(unavailable), true);
          });
        if (outcome === 'fenced') {
          // Another request took the key over: a retry gets its outcome.
          const busy = new IdempotencyInProgressError(RETRY_AFTER_MS);
          throw new RollBack(work.refuse(busy), false);
        }
        // Committed without a record, a retry would run it again: roll back instead.
        if (outcome === 'released') throw new RollBack(new NotStoredError(claim.handler), true);
        return result;
      });
      this.recorder.committed(claim);
      return result;
    } catch (error) {
      ran();
      if (error instanceof RollBack) {
        work.rolledBack?.();
        if (error.release) await this.calls.release(claim, error.answer);
        throw error.answer;
      }
      // A step was refused (fenced, the store failed, unreadable): the run answers that,
      // whatever the handler made of the step's error.
      const refusal = claim.steps?.refusal;
      if (refusal) {
        if (refusal.release) await this.calls.release(claim, refusal.error);
        throw work.refuse(refusal.error);
      }
      if (work.keepsClaim?.(error)) {
        this.logger.warn(
          `${claim.handler}: timed out; ${claim.key} stays claimed until its lease runs out`,
        );
        throw error;
      }
      // An error the route stores (`storeErrors`) is an outcome; any other frees the key. A
      // step mismatch or a step that cannot be recorded never is: they say the code must
      // change, not what the request comes to.
      const ofSteps =
        error instanceof IdempotencyStepMismatchError || error instanceof StepNotRecordedError;
      if (ofSteps || !(await this.recorder.error(claim, error, work))) {
        await this.calls.release(claim, error);
      }
      throw error;
    }
  }
}
