import type { ListedRecord, ListRecordsQuery, RecordAbout } from '../record-listing';
import { keyPrefixOf, readCursor } from '../record-pages';

/** A completion, as the memory store's listing keeps it: its key and time (store clock). */
interface Completion {
  key: string;
  at: number;
}

/** What the listing reads of a completed record. */
export interface CompletedView {
  /** The key's live completed record, if any (its completion time on the store's clock). */
  completed(key: string): { completedAt: number; meta: string; about?: RecordAbout } | undefined;
}

/**
 * The memory store's completed records by key prefix, in completion order (as the Redis store's
 * done lists): a page is read from the newest (or oldest) end, so that listing a few of many
 * completed records reads about as many as it lists. A completion that is gone (expired,
 * evicted, deleted, completed anew) stays in the order until a read skips it; the order is
 * compacted when most of it is gone.
 */
export class MemoryDone {
  private readonly byPrefix = new Map<string, { order: Completion[]; live: Set<string> }>();

  constructor(
    private readonly view: CompletedView,
    /** A time of the store's clock in ms since the epoch. */
    private readonly epoch: (time: number) => number,
  ) {}

  completed(key: string, at: number): void {
    const prefix = keyPrefixOf(key);
    if (prefix === undefined) return;
    let done = this.byPrefix.get(prefix);
    if (!done) this.byPrefix.set(prefix, (done = { order: [], live: new Set() }));
    done.order.push({ key, at });
    done.live.add(key);
  }

  /** The completed record at `key` is gone (expired, evicted, deleted). */
  dropped(key: string): void {
    const prefix = keyPrefixOf(key);
    const done = prefix === undefined ? undefined : this.byPrefix.get(prefix);
    if (!done?.live.delete(key)) return;
    if (done.order.length > 64 && done.order.length > done.live.size * 2) {
      done.order = done.order.filter((completion) => this.current(completion));
    }
  }

  count(prefix: string): number {
    return this.byPrefix.get(prefix)?.live.size ?? 0;
  }

  /**
   * The completed records under the query's prefix that may be on its page, in its order, from
   * where its window (cursor, ages) starts: up to `limit + 1` that pass its filters, and the rest
   * of the last one's millisecond (ties are ordered by key, which the caller sorts by). `now`:
   * the store's time, in epoch ms.
   */
  candidates(query: ListRecordsQuery, now: number): ListedRecord[] {
    const order = this.byPrefix.get(query.prefix)?.order ?? [];
    const cursor = query.cursor === undefined ? undefined : readCursor(query.cursor).since;
    let newestTime = query.minAgeMs === undefined ? Infinity : now - query.minAgeMs;
    let oldestTime = query.maxAgeMs === undefined ? -Infinity : now - query.maxAgeMs;
    const newest = query.order !== 'oldest';
    if (cursor !== undefined && newest) newestTime = Math.min(newestTime, cursor);
    if (cursor !== undefined && !newest) oldestTime = Math.max(oldestTime, cursor);
    const items: ListedRecord[] = [];
    let last: number | undefined;
    const step = newest ? -1 : 1;
    let i = newest
      ? this.firstAfter(order, newestTime) - 1
      : this.firstAfter(order, oldestTime - 1);
    for (; i >= 0 && i < order.length; i += step) {
      const item = this.current(order[i]);
      if (!item) continue;
      if (item.since > newestTime || item.since < oldestTime) break;
      if (items.length > query.limit && item.since !== last) break;
      if (query.route === undefined || item.about?.route === query.route) {
        items.push(item);
        last = item.since;
      }
    }
    return items;
  }

  clear(): void {
    this.byPrefix.clear();
  }

  /** The listed record of a completion, if it is still that record's. */
  private current({ key, at }: Completion): ListedRecord | undefined {
    const record = this.view.completed(key);
    if (record?.completedAt !== at) return undefined;
    const { about, meta } = record;
    return { key, state: 'completed', ...(about && { about }), since: this.epoch(at), meta };
  }

  /** The first place whose completion is after `time` (epoch ms), by binary search. */
  private firstAfter(order: Completion[], time: number): number {
    let [low, high] = [0, order.length];
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.epoch(order[middle].at) <= time) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}
