import type { RecordedStep } from '../idempotency.store';
import {
  type ListedRecord,
  type ListedState,
  LISTED_STATES,
  type ListRecordsPage,
  type ListRecordsQuery,
  type RecordCounts,
} from '../record-listing';
import { cursorAfter, readCursor } from '../record-pages';
import type { SqlDialect } from './sql-dialect';
import { countSql, listSql, type ListRow, markAbandonedSql, stepsOfSql } from './sql-listing-sql';
import type { SqlQueries } from './sql-queries';

/** The most items a page holds. */
const MAX_LIMIT = 500;

/**
 * A SQL store's listing (`list`, `countRecords`, `markAbandoned`), over its records' rows: an
 * index serves each state (migration 003), so that a page reads about as many rows as it
 * returns. Cursors hold the last item's time in µs and its key: the page after it starts after
 * that position, whatever was written since.
 */
export class SqlListing {
  constructor(
    private readonly dialect: SqlDialect,
    private readonly queries: SqlQueries,
  ) {}

  async list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    checkQuery(query);
    const stepsTable = await this.stepsTable();
    if (query.state === 'half_done' && !stepsTable) return { items: [] };
    const cursor = query.cursor === undefined ? undefined : readCursor(query.cursor);
    const after = cursor && { us: cursor.since, key: cursor.key };
    const { listing, table } = this.dialect;
    const statement = listSql(listing, table, { ...query, stepsTable, after });
    const rows = await this.queries.rows<ListRow, unknown>(statement, undefined);
    const page = rows.slice(0, query.limit);
    const keys = page.map((row) => String(row.key));
    const steps =
      stepsTable && query.state !== 'completed' ? await this.stepsOf(stepsTable, keys) : undefined;
    const items = page.map((row, i) => listed(query.state, row, keys[i], steps?.get(keys[i])));
    if (rows.length <= query.limit) return { items };
    const last = page[page.length - 1];
    return { items, cursor: cursorAfter({ since: Number(last.since_us), key: String(last.key) }) };
  }

  async countRecords(prefix: string, stuckAfterMs?: number): Promise<RecordCounts> {
    const { listing, table } = this.dialect;
    const stepsTable = await this.stepsTable();
    const statement = countSql(listing, table, prefix, stuckAfterMs, stepsTable);
    const [row] = await this.queries.rows<Record<ListedState, number | string>, unknown>(
      statement,
      undefined,
    );
    const count = (state: ListedState) => Number(row[state] ?? 0);
    return {
      running: count('running'),
      stuck: count('stuck'),
      half_done: count('half_done'),
      completed: count('completed'),
    };
  }

  async markAbandoned(key: string, endedBefore: number): Promise<boolean> {
    if (!Number.isFinite(endedBefore)) {
      throw new TypeError(`markAbandoned(): endedBefore must be ms since the epoch`);
    }
    const stepsTable = await this.stepsTable();
    if (!stepsTable) return false;
    const { listing, table } = this.dialect;
    const us = Math.floor(endedBefore * 1000);
    const statement = markAbandonedSql(listing, table, key, us, stepsTable);
    return (await this.queries.changed(statement, undefined)) === 1;
  }

  /** The steps table, once it exists (without it nothing is half done). */
  private async stepsTable(): Promise<string | undefined> {
    return (await this.queries.hasSteps()) ? this.dialect.stepsTable : undefined;
  }

  /** The live steps of a page's keys, by key. */
  private async stepsOf(stepsTable: string, keys: string[]) {
    const byKey = new Map<string, RecordedStep[]>();
    if (keys.length === 0) return byKey;
    const statement = stepsOfSql(this.dialect.listing, stepsTable, keys);
    const rows = await this.queries.rows<
      { key: string | Buffer; idx: number; name: string },
      unknown
    >(statement, undefined);
    for (const { key, idx, name } of rows) {
      const steps = byKey.get(String(key)) ?? [];
      steps.push({ index: Number(idx), name });
      byKey.set(String(key), steps);
    }
    return byKey;
  }
}

/** A list row as the contract's item. Times in ms, rounded up: never before the database's. */
function listed(
  state: ListedState,
  row: ListRow,
  key: string,
  steps: RecordedStep[] | undefined,
): ListedRecord {
  const item: ListedRecord = { key, state, since: Math.ceil(Number(row.since_us) / 1000) };
  if (row.route !== null) item.about = { route: row.route, label: row.label ?? '' };
  if (state === 'running' || state === 'stuck') {
    const left = (Number(row.expires_us) - Number(row.now_us)) / 1000;
    item.leaseMsLeft = left > 0 ? Math.ceil(left) : Math.floor(left);
  }
  if (steps) item.steps = steps;
  if (state === 'completed') item.meta = row.meta ?? '';
  if (state === 'half_done') item.reported = Boolean(Number(row.reported));
  return item;
}

/** Refuses what no SQL statement should be built from. */
function checkQuery(query: ListRecordsQuery): void {
  if (!LISTED_STATES.includes(query.state)) {
    throw new TypeError(`list(): state must be one of ${LISTED_STATES.join(', ')}`);
  }
  const { limit } = query;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new TypeError(`list(): limit must be a whole number from 1 to ${MAX_LIMIT}`);
  }
  for (const name of ['minAgeMs', 'maxAgeMs', 'stuckAfterMs'] as const) {
    const value = query[name];
    if (value !== undefined && !(Number.isFinite(value) && value >= 0)) {
      throw new TypeError(`list(): ${name} must be a number of ms, 0 or more`);
    }
  }
}
