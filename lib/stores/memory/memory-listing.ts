import type { RecordedStep } from '../idempotency.store';
import type {
  ListedRecord,
  ListedState,
  ListRecordsPage,
  ListRecordsQuery,
  RecordAbout,
  RecordCounts,
} from '../record-listing';
import { keyPrefixOf, pageOf, passesFilters } from '../record-pages';

/**
 * How long a claim whose lease ran out without steps stays listed as stuck, from its claim
 * (ms): unless its key is claimed again or deleted first. The Redis store keeps them as long.
 */
export const STUCK_RETENTION_MS = 24 * 60 * 60 * 1000;

/** A claim as listing remembers it, past its record's lease. */
interface Run {
  about?: RecordAbout;
  /** On the store's clock, as every time here. */
  claimedAt: number;
  leaseUntil: number;
  /** When it was released (with steps left: half done). */
  endedAt?: number;
  reported: boolean;
}

/** A record as the listing reads it. */
interface ViewedRecord {
  state: 'pending' | 'completed';
  expiresAt: number;
  about?: RecordAbout;
  completedAt?: number;
  response?: { meta: string };
}

/** What the listing reads of the store's records and steps. */
export interface MemoryRecordsView {
  /** The key's live record, if any. */
  record(key: string): ViewedRecord | undefined;
  /** The key's live steps, if any. */
  steps(key: string): RecordedStep[] | undefined;
  /** The keys of every record (expired ones too). */
  keys(): Iterable<string>;
}

/**
 * The memory store's listing. Completed records are found among the records (the store holds at
 * most `maxEntries`). Claims (running, stuck, half done) are remembered apart from the records:
 * a record goes when its lease runs out, and its claim must still be listed, as stuck, or as
 * half done when it recorded steps. A completion or a delete forgets the claim; a release
 * forgets it unless steps remain.
 */
export class MemoryListing {
  private readonly runs = new Map<string, Run>();
  /** The store's clock plus this is ms since the epoch; fixed, so a time always reads the same. */
  private readonly epochOffset: number;

  constructor(
    private readonly now: () => number,
    private readonly view: MemoryRecordsView,
  ) {
    this.epochOffset = Date.now() - now();
  }

  /** A page of records under the query's prefix in its state. */
  list(query: ListRecordsQuery): ListRecordsPage {
    const now = this.epoch(this.now());
    const items =
      query.state === 'completed'
        ? this.completed(query.prefix)
        : this.listed(query.prefix, query.state, query.stuckAfterMs);
    return pageOf(
      items.filter((item) => passesFilters(item, query, now)),
      query,
    );
  }

  /** A fresh claim (a retry of a half-done run too: running again, its report mark cleared). */
  claimed(key: string, about: RecordAbout | undefined, leaseMs: number): void {
    const now = this.now();
    this.runs.set(key, { about, claimedAt: now, leaseUntil: now + leaseMs, reported: false });
  }

  extended(key: string, leaseMs: number): void {
    const run = this.runs.get(key);
    if (run) run.leaseUntil = this.now() + leaseMs;
  }

  /** A release: half done when steps remain, else nothing to list. */
  released(key: string): void {
    const run = this.runs.get(key);
    if (run && this.view.steps(key)) run.endedAt = this.now();
    else this.runs.delete(key);
  }

  /** A completion or a delete. */
  forget(key: string): void {
    this.runs.delete(key);
  }

  clear(): void {
    this.runs.clear();
  }

  /** Forgets the claims nothing lists any more (see {@link classify}). */
  sweep(): void {
    for (const key of this.runs.keys()) this.classify(key);
  }

  /**
   * The claims under `prefix` in `state` (running, stuck or half done). `stuckAfterMs`: a live
   * claim made longer ago is stuck.
   */
  private listed(prefix: string, state: ListedState, stuckAfterMs?: number): ListedRecord[] {
    const items: ListedRecord[] = [];
    for (const key of this.runs.keys()) {
      if (keyPrefixOf(key) !== prefix) continue;
      const item = this.classify(key, stuckAfterMs);
      if (item?.state === state) items.push(item);
    }
    return items;
  }

  /** How many records under `prefix` each state holds. */
  count(prefix: string, stuckAfterMs?: number): RecordCounts {
    const completed = this.completed(prefix).length;
    const counts: RecordCounts = { running: 0, stuck: 0, half_done: 0, completed };
    for (const key of this.runs.keys()) {
      if (keyPrefixOf(key) !== prefix) continue;
      const item = this.classify(key, stuckAfterMs);
      if (item) counts[item.state]++;
    }
    return counts;
  }

  /** Marks a half-done run reported, once, if it ended at or before `endedBefore` (epoch ms). */
  markAbandoned(key: string, endedBefore: number): boolean {
    const run = this.runs.get(key);
    const item = this.classify(key);
    if (!run || item?.state !== 'half_done' || run.reported || item.since > endedBefore) {
      return false;
    }
    run.reported = true;
    return true;
  }

  /** The live completed records under `prefix`. */
  private completed(prefix: string): ListedRecord[] {
    const items: ListedRecord[] = [];
    for (const key of [...this.view.keys()]) {
      const record = keyPrefixOf(key) === prefix ? this.view.record(key) : undefined;
      if (record?.state !== 'completed') continue;
      const { about, completedAt, response } = record;
      const since = this.epoch(completedAt!);
      items.push({ key, state: 'completed', ...(about && { about }), since, meta: response!.meta });
    }
    return items;
  }

  /** A time of the store's clock in whole ms since the epoch (rounded up: never before it). */
  private epoch(time: number): number {
    return Math.ceil(time + this.epochOffset);
  }

  /**
   * What the claim at `key` is now, or undefined when nothing lists it any more (then it is
   * forgotten): its steps expired after a release, or it died without steps longer than
   * {@link STUCK_RETENTION_MS} ago.
   */
  private classify(key: string, stuckAfterMs?: number): ListedRecord | undefined {
    const run = this.runs.get(key);
    if (!run) return undefined;
    const now = this.now();
    const record = this.view.record(key);
    const steps = this.view.steps(key);
    const { about, claimedAt, reported } = run;
    const base = { key, ...(about && { about }), ...(steps && { steps }) };
    const since = this.epoch(claimedAt);
    if (record?.state === 'pending') {
      const held = stuckAfterMs !== undefined && now - claimedAt > stuckAfterMs;
      const leaseMsLeft = Math.ceil(record.expiresAt - now);
      return { ...base, state: held ? 'stuck' : 'running', since, leaseMsLeft };
    }
    if (!record && steps) {
      const ended = this.epoch(run.endedAt ?? run.leaseUntil);
      return { ...base, state: 'half_done', since: ended, reported };
    }
    if (!record && run.endedAt === undefined && claimedAt > now - STUCK_RETENTION_MS) {
      const leaseMsLeft = Math.floor(run.leaseUntil - now);
      return { ...base, state: 'stuck', since, leaseMsLeft };
    }
    this.runs.delete(key);
    return undefined;
  }
}
