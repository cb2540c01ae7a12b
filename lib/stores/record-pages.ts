import type { ListedRecord, ListRecordsPage, ListRecordsQuery } from './record-listing';

/**
 * The key prefix a store key was built under: what precedes its trailing `{hash tag}` (the
 * module's keys are `<keyPrefix>{<hash>}`, see lib/core/record-key.ts). Undefined for a key of
 * another shape, which no listing finds.
 */
export function keyPrefixOf(key: string): string | undefined {
  const tag = /\{[^{}]*\}$/.exec(key);
  return tag ? key.slice(0, tag.index) : undefined;
}

/** Where a page ended: the last item's time and key, which break ties. */
interface Position {
  since: number;
  key: string;
}

/**
 * The cursor after `item`: its time and key, base64url so it travels in a query string. Opaque
 * to callers; stores that order by (since, key) share it.
 */
export function cursorAfter(item: Position): string {
  return Buffer.from(JSON.stringify([item.since, item.key])).toString('base64url');
}

/** The position a cursor from {@link cursorAfter} holds; throws a TypeError for anything else. */
export function readCursor(cursor: string): Position {
  try {
    const [since, key] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown[];
    if (Number.isSafeInteger(since) && typeof key === 'string') {
      return { since: since as number, key };
    }
  } catch {
    // Not ours: refused below.
  }
  throw new TypeError('list(): the cursor is not one this store returned');
}

/**
 * Orders by `since`, then key (ties), newest or oldest first: the order of every listing, so
 * that a cursor's position is the same whichever store (or Redis node) an item came from.
 */
export function compareListed(
  order: ListRecordsQuery['order'],
): (a: Position, b: Position) => number {
  const sign = order === 'oldest' ? 1 : -1;
  return (a, b) => sign * (a.since - b.since || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** Whether a record of this route and time passes the query's route and age filters. */
export function passesFilters(
  item: { since: number; about?: { route: string } },
  query: ListRecordsQuery,
  now: number,
): boolean {
  if (query.route !== undefined && item.about?.route !== query.route) return false;
  const age = now - item.since;
  if (query.minAgeMs !== undefined && age < query.minAgeMs) return false;
  return query.maxAgeMs === undefined || age <= query.maxAgeMs;
}

/**
 * A page of `items` (already filtered): sorted, after the query's cursor, at most `limit`, with
 * the cursor of the next page when more follow.
 */
export function pageOf(items: ListedRecord[], query: ListRecordsQuery): ListRecordsPage {
  const compare = compareListed(query.order);
  const from = query.cursor === undefined ? undefined : readCursor(query.cursor);
  const after = from ? items.filter((item) => compare(item, from) > 0) : items;
  after.sort(compare);
  const page = after.slice(0, query.limit);
  return after.length > query.limit
    ? { items: page, cursor: cursorAfter(page[page.length - 1]) }
    : { items: page };
}
