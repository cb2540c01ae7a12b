import { Logger } from '@nestjs/common';
import { describeError } from './errors';

/**
 * Deletes a SQL store's expired rows on an interval, table by table (the records', then the
 * steps'), in batches: each batch one statement (its own short transaction), repeated until one
 * comes back short, so no sweep holds many row locks or a long transaction. Never two sweeps of
 * one store at once.
 */
export class Sweeper {
  private timer?: NodeJS.Timeout;
  private running = false;
  private stopped = false;

  constructor(
    /** Per table: deletes at most `batch` expired rows; resolves how many it deleted. */
    private readonly deleteBatches: ((batch: number) => Promise<number>)[],
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

  /**
   * Deletes each table's expired rows until a batch comes back short. @returns the rows deleted.
   */
  async sweep(): Promise<number> {
    if (this.running || this.stopped) return 0;
    this.running = true;
    let deleted = 0;
    try {
      for (const deleteBatch of this.deleteBatches) {
        for (;;) {
          const count = await deleteBatch(this.batchSize);
          deleted += count;
          if (this.stopped) return deleted;
          if (count < this.batchSize) break;
        }
      }
      return deleted;
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
