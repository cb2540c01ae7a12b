import type { Logger } from '@nestjs/common';
import { describeError } from '../sql/errors';
import type { Watchers } from '../sql/watchers';

/** First pause after a wait starts (or news is due), in ms. */
export const FIRST_POLL_MS = 25;

/**
 * MySQL has no LISTEN/NOTIFY. Waiters on a record this process completes, releases or deletes are
 * woken at once by the store; for a holder in another process, this checks every watched key in
 * one statement (the keys whose record is no longer pending are woken, and claim again), first
 * {@link FIRST_POLL_MS} after a wait starts, then backing off (doubling) to `maxMs`. One query
 * per process per pause however many requests wait, and none while nobody waits.
 */
export class MysqlPoller {
  private timer?: NodeJS.Timeout;
  private delay = FIRST_POLL_MS;
  private polling = false;
  private stopped = false;

  constructor(
    private readonly watchers: Watchers,
    /** Of `keys`, those still pending. */
    private readonly pending: (keys: string[]) => Promise<Set<string>>,
    private readonly maxMs: number,
    private readonly logger: Logger,
  ) {}

  /** Checks soon: a wait started, or a completion may commit any moment (transactional). */
  soon(): void {
    if (this.stopped) return;
    this.delay = FIRST_POLL_MS;
    clearTimeout(this.timer);
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped || this.watchers.size === 0) return;
    this.timer = setTimeout(() => void this.poll(), this.delay);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    try {
      const keys = [...this.watchers.keys()];
      if (keys.length === 0) return;
      const pending = await this.pending(keys);
      for (const key of keys) if (!pending.has(key)) this.watchers.wake(key);
    } catch (error) {
      // A waiter still claims again when its holder's lease runs out; the next poll may work.
      if (!this.stopped)
        this.logger.warn(`Checking waited-on records failed: ${describeError(error)}`);
    } finally {
      this.polling = false;
      this.delay = Math.min(this.delay * 2, this.maxMs);
      this.schedule();
    }
  }
}
