import type { Logger } from '@nestjs/common';
import { IdempotencyStoreTimeoutError } from '../errors/store-timeout.error';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type { IdempotencyStoreOperation } from '../observability/metrics';
import type {
  ClaimRequest,
  ClaimResult,
  CompleteOptions,
  IdempotencyStore,
  StoredResponse,
  StoredStep,
  TransactionalIdempotencyStore,
  WatchListener,
} from '../stores/idempotency.store';
import { withTimeout } from '../utils/timeout';
import { describe, type EventSource, type OutcomeEvents } from './outcome-events';
import type { ClaimSteps } from './steps';

/** What a run that recorded steps, or resumed from some, completes with. */
const CLEAR_STEPS: CompleteOptions = { clearSteps: true };

/** One request's claim, as the interceptor tracks it while the handler runs. */
export interface Claim extends EventSource {
  /** The store key (prefix and hash). */
  key: string;
  /** The owner token. */
  token: string;
  options: ResolvedIdempotencyOptions;
  /**
   * The scope the key was hashed with (the route, then the record's owner) and the client's key
   * as sent: what the record's label holds, which operators list it by (`IdempotencyRecords`).
   * Without `clientKey` the record carries no label.
   */
  scope?: string;
  clientKey?: string;
  /** The run's steps, set when a `resumable` claim took the key; undefined otherwise. */
  steps?: ClaimSteps;
}

/** A running claim whose lease the heartbeat renews. */
interface Beat {
  claim: Claim;
  /** When it is next renewed (`performance.now()` clock). */
  due: number;
  /** When renewing stops, however long the handler runs (`maxLockHold` after the claim). */
  until: number;
  /** A renewal is in flight: the next waits for it, so two never overlap. */
  renewing: boolean;
  /** The set it is in (its lease length's). */
  running: Set<Beat>;
}

/**
 * The store, as the request path calls it: every call bounded by `storeTimeout` and timed for the
 * metrics, a claim that lands after its request gave up released, and the lease renewed while the
 * handler runs.
 */
export class StoreCalls {
  /** Running claims, per lease length (see {@link heartbeat}). */
  private readonly heartbeats = new Map<number, { running: Set<Beat>; timer: NodeJS.Timeout }>();
  /** Set by {@link close}: no lease is renewed any more. */
  private closed = false;

  constructor(
    readonly store: IdempotencyStore,
    private readonly events: OutcomeEvents,
    private readonly logger: Logger,
  ) {}

  /**
   * One claim. A claim that timed out may still reach the store later (queued while Redis was
   * connecting or stalled): if it then claims the key, nobody runs the handler, so it is released
   * at once instead of staying pending for lockTtl.
   */
  async claim(claim: Claim, request: ClaimRequest): Promise<ClaimResult> {
    const claiming = this.store.claim(claim.key, request);
    try {
      return await this.call('claim', claiming, claim.options);
    } catch (error) {
      if (error instanceof IdempotencyStoreTimeoutError) {
        claiming.then(
          (late) => (late.status === 'claimed' ? this.release(claim, error) : undefined),
          () => {},
        );
      } else {
        // A claim that rejects may still have reached the store (the connection dropped after
        // the command was sent): nobody runs the handler, so free the key now rather than after
        // lockTtl. Owner-checked, so it never frees a key another request holds.
        void this.releaseIfHeld(claim, error);
      }
      throw error;
    }
  }

  /**
   * Stores the response if the claim still owns the key, deleting the key's steps when the run
   * recorded some or resumed from some (and only then: other completions cost what they did).
   * @returns whether it did.
   */
  complete(claim: Claim, response: StoredResponse): Promise<boolean> {
    const { key, token, options } = claim;
    const completing = claim.steps?.touched
      ? this.store.complete(key, token, response, options.ttl, CLEAR_STEPS)
      : this.store.complete(key, token, response, options.ttl);
    return this.call('complete', completing, options);
  }

  /**
   * Records a step under the claim, kept `ttl` (see {@link IdempotencyStore.recordStep}).
   * @returns false when the claim no longer owns the key (fenced).
   */
  recordStep(claim: Claim, step: StoredStep): Promise<boolean> {
    const { key, token, options } = claim;
    return this.call('step', this.store.recordStep!(key, token, step, options.ttl), options);
  }

  /**
   * Records a step through the app's transaction `tx` (a transactional step).
   * @returns false when the claim no longer owns the key: the caller rolls back.
   */
  recordStepInTransaction(tx: unknown, claim: Claim, step: StoredStep): Promise<boolean> {
    const { key, token, options } = claim;
    const store = this.store as TransactionalIdempotencyStore;
    const writing = store.recordStepInTransaction!(tx, key, token, step, options.ttl);
    return this.call('step', writing, options);
  }

  /**
   * Stores the response through the app's transaction `tx`, if the claim still owns the key.
   * @returns whether it did.
   */
  completeInTransaction(tx: unknown, claim: Claim, response: StoredResponse): Promise<boolean> {
    const { key, token, options } = claim;
    const store = this.store as TransactionalIdempotencyStore;
    const writing = store.completeInTransaction(tx, key, token, response, options.ttl);
    return this.call('complete', writing, options);
  }

  /** Gives the claim up (logged, never thrown: the lease frees the key anyway). */
  async release(claim: Claim, cause?: unknown): Promise<void> {
    try {
      await this.call('release', this.store.release(claim.key, claim.token), claim.options);
      this.events.emit(claim, 'released', claim.key, cause);
    } catch (error) {
      this.logger.error(
        `${claim.handler}: releasing ${claim.key} failed (${describe(error)}); it frees itself when the lease expires`,
      );
    }
  }

  /**
   * Gives up a claim that may or may not have reached the store: quietly, since the store is
   * likely failing already (the lease frees the key anyway); reported only when it freed one.
   */
  private async releaseIfHeld(claim: Claim, cause: unknown): Promise<void> {
    try {
      const released = this.store.release(claim.key, claim.token);
      if (!(await this.call('release', released, claim.options))) return;
    } catch {
      return;
    }
    this.events.emit(claim, 'released', claim.key, cause);
    this.logger.warn(
      `${claim.handler}: a claim on ${claim.key} failed (${describe(cause)}) after reaching the store; released it`,
    );
  }

  /**
   * Watches the key (see {@link IdempotencyStore.watch}); undefined when the store cannot notify
   * or does not answer in time. A subscription that lands after the timeout is ended then.
   */
  async watch(claim: Claim, listener: WatchListener): Promise<(() => void) | undefined> {
    const watching = this.store.watch(claim.key, listener);
    try {
      return await this.call('watch', watching, claim.options);
    } catch (error) {
      watching.then(
        (late) => late?.(),
        () => {},
      );
      this.logger.warn(
        `${claim.handler}: cannot wait on ${claim.key} (${describe(error)}); answering 409`,
      );
      return undefined;
    }
  }

  /**
   * Renews the lease every third of lockTtl while the handler runs and its outcome is written,
   * until the returned stop function is called, for at most `maxLockHold`: a handler hung past
   * it (a dead socket) stops being renewed, so its lease runs out within lockTtl and a retry
   * runs; its late completion is then refused by the owner check (fenced). One renewal at a
   * time per claim: a slow store never gets a second before the first answered.
   *
   * The running claims of one lease length share a timer, which ticks every sixth of it and
   * renews those due: no timer is created and cleared per request.
   */
  heartbeat(claim: Claim): () => void {
    if (this.closed) return () => {};
    const { lockTtl, maxLockHold } = claim.options;
    const every = Math.max(1, Math.floor(lockTtl / 3));
    let beats = this.heartbeats.get(lockTtl);
    if (!beats) {
      const running = new Set<Beat>();
      const timer = setInterval(
        () => {
          if (running.size === 0) {
            // Nothing left to renew: the next claim of this lease length starts a timer again.
            clearInterval(timer);
            this.heartbeats.delete(lockTtl);
            return;
          }
          const now = performance.now();
          for (const beat of running) {
            if (beat.due > now || beat.renewing) continue;
            if (now >= beat.until) {
              running.delete(beat);
              this.heldTooLong(beat.claim);
              continue;
            }
            beat.due = now + every;
            this.renew(beat);
          }
        },
        Math.max(1, Math.floor(every / 2)),
      );
      timer.unref();
      this.heartbeats.set(lockTtl, (beats = { running, timer }));
    }
    const now = performance.now();
    const beat: Beat = {
      claim,
      due: now + every,
      until: now + maxLockHold,
      renewing: false,
      running: beats.running,
    };
    beats.running.add(beat);
    return () => beat.running.delete(beat);
  }

  /**
   * Stops every heartbeat (application shutdown): the leases of handlers still running then run
   * out within lockTtl, so another instance can take their keys, even if one hung.
   */
  close(): void {
    this.closed = true;
    for (const { running, timer } of this.heartbeats.values()) {
      running.clear();
      clearInterval(timer);
    }
    this.heartbeats.clear();
  }

  private heldTooLong(claim: Claim): void {
    this.logger.warn(
      `${claim.handler}: still running after maxLockHold (${claim.options.maxLockHold} ms); no longer renewing ` +
        `${claim.key}, whose lease runs out within lockTtl: a retry may then run, and this ` +
        "run's outcome will not be stored",
    );
  }

  private renew(beat: Beat): void {
    const { claim } = beat;
    const { options } = claim;
    beat.renewing = true;
    this.call('extend', this.store.extend(claim.key, claim.token, options.lockTtl), options)
      .then(
        (owned) => {
          if (owned || !beat.running.delete(beat)) return;
          this.events.emit(claim, 'lease_lost', claim.key);
          this.logger.warn(`${claim.handler}: lost the lease on ${claim.key} while running`);
        },
        (error) =>
          this.logger.warn(`${claim.handler}: renewing ${claim.key} failed (${describe(error)})`),
      )
      .finally(() => (beat.renewing = false));
  }

  /** A store call bounded by storeTimeout, so a hung store cannot hang a request. */
  private call<T>(
    operation: IdempotencyStoreOperation,
    promise: Promise<T>,
    options: ResolvedIdempotencyOptions,
  ): Promise<T> {
    const timeout = () => new IdempotencyStoreTimeoutError(operation, options.storeTimeout);
    const bounded = withTimeout(promise, options.storeTimeout, timeout);
    const metrics = this.events.metrics;
    if (!metrics?.recording) return bounded;
    // The first outcome only: a call that timed out may still answer later.
    const started = performance.now();
    const record = (failed: boolean) =>
      metrics.storeLatency(operation, performance.now() - started, failed);
    return bounded.then(
      (value) => {
        record(false);
        return value;
      },
      (error: unknown) => {
        record(true);
        throw error;
      },
    );
  }
}
