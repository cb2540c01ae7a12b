import type { Logger } from '@nestjs/common';
import type { ClaimRequest, ClaimResult, CompletedOutcome } from '../stores/idempotency.store';
import { withTimeout } from '../utils/timeout';
import { describe, type OutcomeEvents } from './outcome-events';
import type { Claim, StoreCalls } from './store-calls';

/**
 * `onConflict: 'wait'`: holds a duplicate until the request that holds its key completes or
 * fails. Never polls: it claims again only when the store notifies it or when the holder's lease
 * runs out. The waiters of one key and payload in this process share a claim in flight, so that
 * one notification costs one store round trip, not one per waiter.
 */
export class OutcomeWaiter {
  /** Waiters' claims in flight, per key and fingerprint (see {@link recheck}). */
  private readonly rechecks = new Map<string, Promise<ClaimResult>>();

  constructor(
    private readonly calls: StoreCalls,
    private readonly events: OutcomeEvents,
    private readonly logger: Logger,
  ) {}

  /**
   * Claims again once the holder completes or fails (or its lease runs out), which replays the
   * stored response, or claims the key when the first request failed or its process died. After
   * `waitTimeout`, or when the store cannot notify, it returns the in-progress result (409).
   */
  async wait(
    claim: Claim,
    request: ClaimRequest,
    first: ClaimResult & { status: 'in_progress' },
  ): Promise<ClaimResult> {
    const { options, handler, key } = claim;
    const deadline = performance.now() + options.waitTimeout;
    let wake!: (completed?: CompletedOutcome) => void;
    let woken = new Promise<CompletedOutcome | undefined>((resolve) => (wake = resolve));
    const unwatch = await this.calls.watch(claim, (completed) => wake(completed));
    if (!unwatch) return first;
    this.events.emit(claim, 'waiting', key);
    let result: ClaimResult = first;
    try {
      for (;;) {
        // Claimed again after watching, so an outcome between the two calls is not missed.
        result = await this.recheck(claim, request);
        const left = deadline - performance.now();
        if (result.status !== 'in_progress' || left <= 0) return result;
        const ms = Math.min(left, result.retryAfterMs + 1);
        const completed = await withTimeout(woken, ms, () => new Error('lease')).catch(
          () => undefined,
        );
        woken = new Promise((resolve) => (wake = resolve));
        // The store handed over the response, stored for this very payload: no claim needed.
        if (completed && completed.fingerprint === request.fingerprint) {
          return { status: 'completed', response: completed.response };
        }
      }
    } catch (error) {
      this.events.emit(claim, 'store_error', key, error);
      this.logger.warn(`${handler}: waiting on ${key} failed (${describe(error)}); answering 409`);
      return result;
    } finally {
      unwatch();
    }
  }

  /**
   * A waiter's claim, with the `waiting` flag so that the outcome is published. Only a final
   * outcome (completed, key reused) is shared: on any other answer each waiter claims for itself,
   * so that only one of them takes a freed key and each marks the record it waits on.
   */
  private async recheck(claim: Claim, request: ClaimRequest): Promise<ClaimResult> {
    const id = `${claim.key}\0${request.fingerprint}`;
    const shared = this.rechecks.get(id);
    if (shared) {
      const result = await shared;
      if (result.status === 'completed' || result.status === 'key_reused') return result;
    }
    const own = this.calls.claim(claim, { ...request, waiting: true });
    this.rechecks.set(id, own);
    try {
      return await own;
    } finally {
      if (this.rechecks.get(id) === own) this.rechecks.delete(id);
    }
  }
}
