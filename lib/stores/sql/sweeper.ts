import { Logger } from '@nestjs/common';
import { describeError } from './errors';

/**
 * Deletes a SQL store's expired records on an interval, in batches: each batch one statement (its
 * own short transaction), repeated until one comes back short, so no sweep holds many row locks
 * or a long transaction. Never two sweeps of one store at once.
 */
export class Sweeper {
  private timer?: NodeJS.Timeout;
  private running = false;
  private stopped = false;

  constructor(
    /** Deletes at most `batch` expired records; resolves how many it deleted. */
    private readonly deleteBatch: (batch: number) => Promise<number>,
    /** Rows per batch. */
    private readonly batchSize: number,
    private readonly logger: Logger,
  ) {}

  /**
   * Calls `tick` (the store's public `sweep()`, so that a subclass or a test sees every sweep)
   * every `intervalMs`; 0: never.
   */
  every(intervalMs: number, tick: () => unknown): void {
    if (intervalMs <= 0) return;
    this.timer = setInterval(tick, intervalMs);
    this.timer.unref();
  }

  /** Deletes expired rows until a batch comes back short. @returns the rows deleted. */
  async sweep(): Promise<number> {
    if (this.running || this.stopped) return 0;
    this.running = true;
    let deleted = 0;
    try {
      for (;;) {
        const count = await this.deleteBatch(this.batchSize);
        deleted += count;
        if (count < this.batchSize || this.stopped) return deleted;
      }
    } catch (error) {
      if (!this.stopped)
        this.logger.error(`Deleting expired records failed: ${describeError(error)}`);
      return deleted;
    } finally {
      this.running = false;
    }
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }
}
