import type { WatchListener } from '../idempotency.store';

/**
 * The watchers of one store, by record key. The SQL stores keep them in the process and wake them
 * from whatever carries the news (PostgreSQL: a notification; MySQL: a write of this process, or
 * a poll): a woken waiter claims again, so a spurious wake-up costs one claim, never a wrong
 * answer.
 */
export class Watchers {
  private readonly byKey = new Map<string, Set<WatchListener>>();

  /** How many keys are watched. */
  get size(): number {
    return this.byKey.size;
  }

  /** The keys watched now. */
  keys(): IterableIterator<string> {
    return this.byKey.keys();
  }

  /** Adds `listener` for `key`; returns the function that removes it. */
  add(key: string, listener: WatchListener): () => void {
    let listeners = this.byKey.get(key);
    if (!listeners) this.byKey.set(key, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.byKey.get(key) === listeners) this.byKey.delete(key);
    };
  }

  /** Wakes every listener of `key`. */
  wake(key: string): void {
    this.byKey.get(key)?.forEach((listener) => listener());
  }

  /** Wakes every listener: after news may have been missed (a lost connection). */
  wakeAll(): void {
    this.byKey.forEach((listeners) => listeners.forEach((listener) => listener()));
  }

  clear(): void {
    this.byKey.clear();
  }
}
