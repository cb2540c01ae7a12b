import type { Logger } from '@nestjs/common';
import { IdempotencyStoreTimeoutError } from '../errors/store-timeout.error';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type { IdempotencyStoreOperation } from '../observability/metrics';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  TransactionalIdempotencyStore,
  WatchListener,
} from '../stores/idempotency.store';
import { withTimeout } from '../utils/timeout';
import { describe, type EventSource, type OutcomeEvents } from './outcome-events';

/** One request's claim, as the interceptor tracks it while the handler runs. */
export interface Claim extends EventSource {
  /** The store key (prefix and hash). */
  key: string;
  /** The owner token. */
  token: string;
  options: ResolvedIdempotencyOptions;
}

/** A running claim whose lease the heartbeat renews. */
interface Beat {
  claim: Claim;
  /** When it is next renewed (`performance.now()` clock). */
  due: number;
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
  private readonly heartbeats = new Map<number, Set<Beat>>();

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
      }
      throw error;
    }
  }

  /** Stores the response if the claim still owns the key. @returns whether it did. */
  complete(claim: Claim, response: StoredResponse): Promise<boolean> {
    const { key, token, options } = claim;
    return this.call('complete', this.store.complete(key, token, response, options.ttl), options);
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
   * Renews the lease every third of lockTtl while the handler runs. Returns the stop function.
   * The running claims of one lease length share a timer, which ticks every sixth of it and
   * renews those due: no timer is created and cleared per request.
   */
  heartbeat(claim: Claim): () => void {
    const { lockTtl } = claim.options;
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
            if (beat.due > now) continue;
            beat.due = now + every;
            this.renew(beat);
          }
        },
        Math.max(1, Math.floor(every / 2)),
      );
      timer.unref();
      this.heartbeats.set(lockTtl, (beats = running));
    }
    const beat: Beat = { claim, due: performance.now() + every, running: beats };
    beats.add(beat);
    return () => beat.running.delete(beat);
  }

  private renew(beat: Beat): void {
    const { claim } = beat;
    const { options } = claim;
    this.call('extend', this.store.extend(claim.key, claim.token, options.lockTtl), options).then(
      (owned) => {
        if (owned || !beat.running.delete(beat)) return;
        this.events.emit(claim, 'lease_lost', claim.key);
        this.logger.warn(`${claim.handler}: lost the lease on ${claim.key} while running`);
      },
      (error) =>
        this.logger.warn(`${claim.handler}: renewing ${claim.key} failed (${describe(error)})`),
    );
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
