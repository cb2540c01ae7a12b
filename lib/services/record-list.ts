import { labelOwner, type RecordLabels } from '../core/record-label';
import { parseDuration } from '../options/duration';
import { unknownOptionProblem } from '../options/option-names';
import {
  LISTED_STATES,
  type ListedRecord,
  type ListedState,
  type ListRecordsQuery,
} from '../stores/record-listing';
import { describeMeta } from '../utils/response-codec';

/** What {@link IdempotencyRecords.list} is asked: one state, optionally narrowed. */
export interface IdempotencyRecordListQuery {
  /**
   * `running` (a claim holds the key, its lease live), `stuck` (a claim whose lease ran out
   * without a completion or release, or held past `maxLockHold`), `half_done` (a `resumable`
   * run recorded steps, nothing completed it and no claim holds it) or `completed`.
   */
  state: ListedState;
  /** Only this route, as events name it (`POST /payments`, `run:orders`), compared exactly. */
  route?: string;
  /** Only records at least this old: ms, or a duration string (`'15m'`). */
  olderThan?: number | string;
  /** Only records at most this old: ms, or a duration string (`'1h'`). */
  newerThan?: number | string;
  /** `newest` first (the default) or `oldest` first, by the age the state counts from. */
  order?: 'newest' | 'oldest';
  /** Items per page, 1 to 500. Default: 50. */
  limit?: number;
  /** The previous page's `cursor`, for the next page of the same query. */
  cursor?: string;
  /** The `keyPrefix` the records were claimed under, when a route overrides the module's. */
  keyPrefix?: string;
}

/**
 * A record as {@link IdempotencyRecords.list} finds it. Pass it as it is to
 * `IdempotencyRecords.inspect()` or `delete()`: they find the record by its `ref`.
 */
export interface IdempotencyRecordListItem {
  /** The record's store key (its prefix and hash): what `inspect()` and `delete()` go by. */
  ref: string;
  /**
   * The client's key as sent. Absent for a record claimed before listing existed, and for one
   * whose label does not open (sealed with a key no longer in `encryption.keys`).
   */
  key?: string;
  /** The route, as events name it; absent for a record claimed before listing existed. */
  route?: string;
  /**
   * The principal that owns the record (a route scoped to `request.user`), by the text of its id
   * (`{ id: '42' }` for `{ id: 42 }` too).
   */
  user?: { id: string };
  /** The tenant that owns the record (a route's `scope` function), by the text of its id. */
  tenant?: string;
  /** The prefix it was listed under. */
  keyPrefix: string;
  state: ListedState;
  /**
   * Ms since what its state counts from, by this process's clock: the claim (running, stuck),
   * the end of the last claim (half done), the completion (completed).
   */
  ageMs: number;
  /** Running and stuck: ms until the lease runs out unless it is renewed (0 once it has). */
  leaseMsLeft?: number;
  /** The steps a `resumable` run recorded, in order (their results are never shown). */
  steps?: { index: number; name: string }[];
  /** Completed: the stored HTTP status (none for a microservice handler or `run()`). */
  status?: number;
  /** Completed: whether the stored outcome is an error (`storeErrors`). */
  error?: boolean;
  /** Half done: whether it was reported abandoned already (`abandonedAfter`). */
  reported?: boolean;
}

/** A page of {@link IdempotencyRecords.list}. */
export interface IdempotencyRecordListPage {
  items: IdempotencyRecordListItem[];
  /** Pass it back as `cursor` (with the same query) for the next page; absent on the last. */
  cursor?: string;
}

/** How many records each state holds ({@link IdempotencyRecords.counts}). */
export type IdempotencyRecordCounts = Record<ListedState, number>;

/** Items per page unless asked otherwise, and the most a page holds. */
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 500;
/**
 * Older than any record (the epoch is 1970): 200 years, in ms. A longer age lists the same, and
 * is cut to it before it reaches a store, where it would overflow SQL's intervals and times.
 */
const MAX_AGE_MS = 200 * 365 * 86_400_000;
/** Longer than any cursor this file writes around a store's. */
const MAX_CURSOR = 4096;
const QUERY_NAMES = namesOfQuery({
  state: 1,
  route: 1,
  olderThan: 1,
  newerThan: 1,
  order: 1,
  limit: 1,
  cursor: 1,
  keyPrefix: 1,
});

function namesOfQuery(names: Record<keyof IdempotencyRecordListQuery, 1>): string[] {
  return Object.keys(names);
}

/**
 * The store's query for `query`, checked.
 * @param stuckAfterMs the module's `maxLockHold`
 * @throws TypeError naming what is wrong (the caller answers 400)
 */
export function storeListQuery(
  query: IdempotencyRecordListQuery,
  defaultPrefix: string,
  stuckAfterMs: number,
): ListRecordsQuery {
  if (typeof query !== 'object' || query === null) throw new TypeError('expected a query object');
  const unknown = unknownOptionProblem(query, QUERY_NAMES);
  if (unknown) throw new TypeError(unknown);
  const { state, route, order = 'newest', limit = DEFAULT_LIMIT, cursor } = query;
  const prefix = query.keyPrefix ?? defaultPrefix;
  if (!LISTED_STATES.includes(state)) {
    throw new TypeError(`state must be one of ${LISTED_STATES.join(', ')}, got ${String(state)}`);
  }
  if (route !== undefined && (typeof route !== 'string' || route === '')) {
    throw new TypeError('route must be a non-empty string, e.g. "POST /payments"');
  }
  if (order !== 'newest' && order !== 'oldest') {
    throw new TypeError(`order must be 'newest' or 'oldest', got ${String(order)}`);
  }
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new TypeError(`limit must be a whole number from 1 to ${MAX_LIMIT}, got ${limit}`);
  }
  if (typeof prefix !== 'string') throw new TypeError('keyPrefix must be a string');
  const minAgeMs = age(query.olderThan, 'olderThan');
  const maxAgeMs = age(query.newerThan, 'newerThan');
  if (minAgeMs !== undefined && maxAgeMs !== undefined && minAgeMs > maxAgeMs) {
    throw new TypeError('olderThan must not be more than newerThan');
  }
  const asked: ListRecordsQuery = { state, prefix, order, limit, stuckAfterMs };
  if (route !== undefined) asked.route = route;
  if (minAgeMs !== undefined) asked.minAgeMs = Math.min(minAgeMs, MAX_AGE_MS);
  if (maxAgeMs !== undefined) asked.maxAgeMs = Math.min(maxAgeMs, MAX_AGE_MS);
  if (cursor !== undefined) asked.cursor = openCursor(cursor, asked);
  return asked;
}

/** A duration bound of the query in ms, or undefined when it is not set. */
function age(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = typeof value === 'string' ? parseDuration(value, name) : value;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new TypeError(`${name} must be ms (0 or more) or a duration such as '15m'`);
  }
  return ms;
}

/** What a cursor is tied to: a page of one query continues that query only. */
function cursorQuery(asked: ListRecordsQuery): string {
  return JSON.stringify([asked.state, asked.order, asked.prefix, asked.route ?? null]);
}

/** The cursor handed to the caller: the store's, with the query it continues. */
export function wrapCursor(asked: ListRecordsQuery, storeCursor: string): string {
  return Buffer.from(`${cursorQuery(asked)}\n${storeCursor}`).toString('base64url');
}

/** The store's cursor inside `cursor`; throws when it is not one of this query's. */
function openCursor(cursor: unknown, asked: ListRecordsQuery): string {
  const bad = new TypeError('cursor is not one this query returned');
  if (typeof cursor !== 'string' || cursor === '' || cursor.length > MAX_CURSOR) throw bad;
  const text = Buffer.from(cursor, 'base64url').toString();
  const newline = text.indexOf('\n');
  if (newline < 0 || text.slice(0, newline) !== cursorQuery(asked)) throw bad;
  return text.slice(newline + 1);
}

/**
 * A store's listed record as operators read it: its label opened (key and owner; none when it
 * does not open), its meta read, its age by `now`. Never throws: one unreadable record must not
 * fail a page.
 */
export function listItem(
  record: ListedRecord,
  keyPrefix: string,
  labels: RecordLabels,
  now: number,
): IdempotencyRecordListItem {
  const { key: ref, state, about, leaseMsLeft, steps, meta, reported } = record;
  const item: IdempotencyRecordListItem = {
    ref,
    keyPrefix,
    state,
    ageMs: Math.max(0, now - record.since),
  };
  if (about) {
    item.route = about.route;
    const opened = labels.open(about.label, ref);
    if (opened) Object.assign(item, { key: opened.key }, labelOwner(opened.owner));
  }
  if (leaseMsLeft !== undefined) item.leaseMsLeft = Math.max(0, leaseMsLeft);
  if (steps?.length) {
    item.steps = steps
      .map(({ index, name }) => ({ index, name }))
      .sort((a, b) => a.index - b.index);
  }
  if (state === 'completed') {
    try {
      const described = describeMeta(meta ?? '');
      if (described.status !== undefined) item.status = described.status;
      item.error = described.error;
    } catch {
      // An unreadable meta: the record is listed, without its status.
    }
  }
  if (state === 'half_done') item.reported = reported === true;
  return item;
}
