import type { RecordedStep } from './idempotency.store';

/**
 * The states operators list records by (see {@link IdempotencyStore.list}):
 * - `running`: a claim holds the key and its lease is live (and, with `stuckAfterMs`, it was
 *   made less than that long ago);
 * - `stuck`: a claim whose lease ran out without a completion or release (its process died or
 *   hung), or that is held longer than `stuckAfterMs` (`maxLockHold`);
 * - `half_done`: a `resumable` run recorded steps, nothing completed it, and no live claim holds
 *   the key (released, failed or crashed): a retry resumes it; nobody may ever send one;
 * - `completed`: an outcome is stored (an error too, with `storeErrors`).
 */
export type ListedState = 'running' | 'stuck' | 'half_done' | 'completed';

/** Every {@link ListedState}, in the order operators read them. */
export const LISTED_STATES: readonly ListedState[] = ['running', 'stuck', 'half_done', 'completed'];

/**
 * What a claim carries for listing: kept with the record and with the steps it records, and
 * returned by {@link IdempotencyStore.list}. Stores keep both strings as they are and never
 * parse them.
 */
export interface RecordAbout {
  /** The route as events name it (`POST /payments`, `run:<scope>`): clear text, filterable. */
  route: string;
  /**
   * The client's key and the record's owner, encoded (and sealed, with `encryption`) by the
   * core: opaque to the store.
   */
  label: string;
}

/** What {@link IdempotencyStore.list} is asked. */
export interface ListRecordsQuery {
  state: ListedState;
  /**
   * Only records claimed under exactly this `keyPrefix`: store keys `<prefix>{<hash>}` (a longer
   * prefix that starts with it, a route's own `keyPrefix`, is another listing).
   */
  prefix: string;
  /** Only records of this route (`RecordAbout.route`, compared exactly). */
  route?: string;
  /** Only records at least this old, in ms (see {@link ListedRecord.since}). */
  minAgeMs?: number;
  /** Only records at most this old, in ms. */
  maxAgeMs?: number;
  /** A running claim made longer ago than this (ms) is listed as `stuck` (`maxLockHold`). */
  stuckAfterMs?: number;
  /** `newest` first (the default) or `oldest` first, by {@link ListedRecord.since}. */
  order?: 'newest' | 'oldest';
  /** At most this many items (1 to 500). */
  limit: number;
  /** Where the previous page ended ({@link ListRecordsPage.cursor}); opaque. */
  cursor?: string;
}

/** One record as {@link IdempotencyStore.list} finds it. Times come from the store's clock. */
export interface ListedRecord {
  /** The store key (prefix and hash). */
  key: string;
  state: ListedState;
  /**
   * What the claim carried; absent for records claimed before listing existed, or by a caller
   * that passed none.
   */
  about?: RecordAbout;
  /**
   * What the record's age counts from, in ms since the epoch: the claim (running, stuck), the
   * end of the last claim (half done: its release, or its lease running out), the completion
   * (completed).
   */
  since: number;
  /** Running: the lease's ms left (> 0). Stuck: 0 or less when the lease ran out. */
  leaseMsLeft?: number;
  /** The recorded steps (places and names), for every state but completed. */
  steps?: RecordedStep[];
  /** Completed: the stored meta (status, error), as `inspect()` returns it. */
  meta?: string;
  /** Half done: whether {@link IdempotencyStore.markAbandoned} reported it already. */
  reported?: boolean;
}

/** A page of {@link IdempotencyStore.list}. */
export interface ListRecordsPage {
  items: ListedRecord[];
  /** Pass it back as `cursor` for the next page; absent on the last. */
  cursor?: string;
}

/** How many records each state holds under a prefix ({@link IdempotencyStore.countRecords}). */
export type RecordCounts = Record<ListedState, number>;
