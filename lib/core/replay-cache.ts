import type { LocalReplayCacheSettings } from '../options';
import type { StoredResponse } from '../stores/idempotency.store';

/** A completed outcome as the store handed it to a replay, and who may replay it. */
interface Entry {
  /** The fingerprint of the request that replayed it: only the same one replays it from here. */
  fingerprint: string;
  response: StoredResponse;
  /** When it stops being replayed from here (`performance.now()` clock). */
  until: number;
}

/**
 * Option `localReplayCache`: completed outcomes this process replayed, kept so that the next
 * replays of the same record skip the store. Entries are what the store returned (sealed, when
 * `encryption` is on), opened again for each replay, so nothing a replay hands on can be changed
 * for the next one. Least recently replayed first out, bounded by entries and bytes.
 */
export class ReplayCache {
  /** By record key, in the order they were last replayed (a Map keeps insertion order). */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  /**
   * Deletions so far. An outcome read from the store while a deletion ran is not kept: it may
   * be the record that deletion removes (deletions are an operator's, rare: any one of them
   * skips keeping what was in flight, whatever its key).
   */
  private deletions = 0;

  constructor(private readonly settings: LocalReplayCacheSettings) {}

  /**
   * The outcome to replay for a claim of `key` with `fingerprint`, or undefined: none kept,
   * expired, or kept for another fingerprint (the store then decides: replay or 422).
   */
  get(key: string, fingerprint: string): StoredResponse | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.until <= performance.now()) {
      this.delete(key);
      return undefined;
    }
    if (entry.fingerprint !== fingerprint) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.response;
  }

  /** Taken before a store read whose outcome may be kept: passed to {@link set}. */
  mark(): number {
    return this.deletions;
  }

  /**
   * Keeps an outcome the store just replayed for a claim with `fingerprint`, read from the store
   * after `mark` was taken; not when a deletion has run since.
   */
  set(key: string, fingerprint: string, response: StoredResponse, mark: number): void {
    if (mark !== this.deletions) return;
    const size = sizeOf(response);
    if (size > this.settings.maxBytes / 10) return;
    this.delete(key);
    this.entries.set(key, { fingerprint, response, until: performance.now() + this.settings.ttl });
    this.bytes += size;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.settings.maxEntries && this.bytes <= this.settings.maxBytes) {
        break;
      }
      this.entries.delete(oldest);
      this.bytes -= sizeOf(entry.response);
    }
  }

  /**
   * Forgets a record (deleted by an operator in this process), and what store reads in flight
   * would keep: called when the deletion starts and again when it ends.
   */
  delete(key: string): void {
    this.deletions++;
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= sizeOf(entry.response);
  }
}

function sizeOf(response: StoredResponse): number {
  return response.body.length + response.meta.length;
}

/** The caches of this process, one per module's options (its interceptor, service, records). */
const caches = new WeakMap<object, ReplayCache>();

/**
 * The replay cache of the module whose resolved options are `options`, shared by everything
 * that module provides; undefined when `localReplayCache` is off.
 */
export function replayCacheOf(options: {
  localReplayCache?: false | LocalReplayCacheSettings;
}): ReplayCache | undefined {
  const { localReplayCache } = options;
  if (!localReplayCache) return undefined;
  let cache = caches.get(options);
  if (!cache) caches.set(options, (cache = new ReplayCache(localReplayCache)));
  return cache;
}
