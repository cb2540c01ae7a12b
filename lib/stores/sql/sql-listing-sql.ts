/**
 * The listing statements of the SQL stores (list, count, the abandoned mark, a page's steps),
 * written once over a few dialect atoms ({@link SqlListingDialect}): times, the key column,
 * placeholders. Each is built per call, with only the conditions the query asks for, so that
 * every bound narrows an index scan (`migration 003`'s indexes, and the expiry index).
 *
 * Where a record is listed, by its row (`r`): pending (`p`) or completed (`c`), its lease
 * (`expires_at`), its owner (NULL once released) and whether its key has live steps:
 * - running: pending, its lease live (and claimed within `stuckAfterMs`), since its claim;
 * - stuck: pending and claimed longer than `stuckAfterMs` ago, or its lease ran out unreleased
 *   and without steps (its process died), for {@link STUCK_KEPT_MS} from its claim;
 * - half done: pending, its lease over (released, or it died) and steps live, since then;
 * - completed: its retention live, since its completion.
 */
import type { ListedState, ListRecordsQuery } from '../record-listing';
import type { SqlStatement } from './sql-dialect';

/**
 * How long a claim that died without steps stays listed as stuck, from its claim (ms): its row
 * is kept as long (the sweeper spares it) unless its key is claimed again or deleted. The memory
 * and Redis stores keep theirs as long.
 */
export const STUCK_KEPT_MS = 24 * 60 * 60 * 1000;

/** Adds a value to a statement's values, and returns its placeholder. */
export type Bind = (value: unknown) => string;

/** What the listing statements need of a database's SQL. */
export interface SqlListingDialect {
  /** The statement's time (fixed for a statement). */
  readonly now: string;
  /** The key column, quoted. */
  readonly key: string;
  /** A table name, quoted. */
  quote(name: string): string;
  /** A fresh statement's placeholders and values. */
  binder(): { bind: Bind; values: unknown[] };
  /** `column` as compared and ordered: by its bytes, whatever the database's collation. */
  ordered(column: string): string;
  /** The time `ms` before now. */
  ago(bind: Bind, ms: number): string;
  /** The time `us` microseconds after the epoch. */
  at(bind: Bind, us: number): string;
  /** A time in whole microseconds since the epoch. */
  us(time: string): string;
  /** Whether the key is `prefix` followed by `{...}` (no other `{` after it). */
  under(bind: Bind, prefix: string): string;
}

/** Where each state's records are listed from, and ordered by. */
const SINCE: Record<ListedState, string> = {
  running: 'claimed_at',
  stuck: 'claimed_at',
  half_done: 'expires_at',
  completed: 'completed_at',
};

/** A list query as the statement is built for it. */
export interface ListPlan extends ListRecordsQuery {
  /** The steps table, if it exists (without it nothing is half done). */
  stepsTable?: string;
  /** The position after which the page starts (the cursor's). */
  after?: { us: number; key: string };
}

/** A listing statement: built for one call, its values bound already. */
export type BuiltStatement = SqlStatement<unknown>;

/** A list row: the record, its times in µs on the database's clock. */
export interface ListRow {
  key: string | Buffer;
  route: string | null;
  label: string | null;
  since_us: number | string;
  expires_us: number | string;
  now_us: number | string;
  meta: string | null;
  reported: boolean | number | null;
}

/** The statement of a page: `limit + 1` rows (one more says another page follows). */
export function listSql(d: SqlListingDialect, table: string, q: ListPlan): BuiltStatement {
  const { bind, values } = d.binder();
  const since = SINCE[q.state];
  const newest = q.order !== 'oldest';
  const [before, dir] = newest ? ['<', 'DESC'] : ['>', 'ASC'];
  const k = d.ordered(d.key);
  const where = [d.under(bind, q.prefix), stateSql(d, bind, q.state, q)];
  if (q.route !== undefined) where.push(`route = ${bind(q.route)}`);
  if (q.minAgeMs !== undefined) where.push(`${since} <= ${d.ago(bind, q.minAgeMs)}`);
  if (q.maxAgeMs !== undefined) where.push(`${since} >= ${d.ago(bind, q.maxAgeMs)}`);
  if (q.after) {
    // The bound on the time alone narrows the index scan; the key breaks ties.
    const at = () => d.at(bind, q.after!.us);
    where.push(`${since} ${before}= ${at()}`);
    where.push(`(${since} ${before} ${at()} OR ${k} ${before} ${bind(q.after.key)})`);
  }
  const text = `SELECT ${d.key}, route, label, ${d.us(since)} AS since_us,
  ${d.us('expires_at')} AS expires_us, ${d.us(d.now)} AS now_us, meta, reported
FROM ${d.quote(table)} r
WHERE ${where.join('\n  AND ')}
ORDER BY ${since} ${dir}, ${k} ${dir}
LIMIT ${bind(q.limit + 1)}`;
  return { name: 'list', text, adHoc: true, bind: () => values };
}

/** How many records of each state are under `prefix` (columns named by state). */
export function countSql(
  d: SqlListingDialect,
  table: string,
  prefix: string,
  stuckAfterMs: number | undefined,
  stepsTable: string | undefined,
): BuiltStatement {
  const { bind, values } = d.binder();
  const t = d.quote(table);
  const q = { stuckAfterMs, stepsTable };
  const completed = `SELECT COUNT(*) FROM ${t} r
    WHERE ${d.under(bind, prefix)} AND ${stateSql(d, bind, 'completed', q)}`;
  const count = (state: ListedState) =>
    `COUNT(CASE WHEN ${stateSql(d, bind, state, q)} THEN 1 END) AS ${state}`;
  const text = `SELECT (${completed}) AS completed,
  ${count('running')}, ${count('stuck')}, ${count('half_done')}
FROM ${t} r
WHERE state = 'p' AND ${d.under(bind, prefix)}`;
  return { name: 'count', text, adHoc: true, bind: () => values };
}

/**
 * Marks the key's half-done run reported, if its claim ended at or before `endedBeforeUs`;
 * changes 1 row when it did. A concurrent mark waits for the row, then finds it reported.
 */
export function markAbandonedSql(
  d: SqlListingDialect,
  table: string,
  key: string,
  endedBeforeUs: number,
  stepsTable: string,
): BuiltStatement {
  const { bind, values } = d.binder();
  const where = [`r.${d.key} = ${bind(key)}`, stateSql(d, bind, 'half_done', { stepsTable })];
  where.push(`expires_at <= ${d.at(bind, endedBeforeUs)}`, 'NOT reported');
  const text = `UPDATE ${d.quote(table)} r SET reported = TRUE
WHERE ${where.join('\n  AND ')}`;
  return { name: 'markAbandoned', text, adHoc: true, bind: () => values };
}

/** The live steps (key, index, name) of `keys`, in index order. */
export function stepsOfSql(d: SqlListingDialect, stepsTable: string, keys: string[]) {
  const { bind, values } = d.binder();
  const text = `SELECT ${d.key}, idx, name FROM ${d.quote(stepsTable)}
WHERE ${d.key} IN (${keys.map(bind).join(', ')}) AND expires_at > ${d.now} ORDER BY idx`;
  return { name: 'stepsOf', text, steps: true, adHoc: true, bind: () => values };
}

/** The condition that a row `r` is in `state` (see the file's comment). */
function stateSql(
  d: SqlListingDialect,
  bind: Bind,
  state: ListedState,
  q: { stuckAfterMs?: number; stepsTable?: string },
): string {
  const live = `expires_at > ${d.now}`;
  const over = `expires_at <= ${d.now}`;
  const claimed = `state = 'p' AND claimed_at IS NOT NULL`;
  const stepsLive = q.stepsTable
    ? `EXISTS (SELECT 1 FROM ${d.quote(q.stepsTable)} s
      WHERE s.${d.key} = r.${d.key} AND s.expires_at > ${d.now})`
    : 'FALSE';
  const held = q.stuckAfterMs;
  switch (state) {
    case 'running':
      return held === undefined
        ? `${claimed} AND ${live}`
        : `${claimed} AND ${live} AND claimed_at >= ${d.ago(bind, held)}`;
    case 'stuck': {
      const holding =
        held === undefined ? '' : `(${live} AND claimed_at < ${d.ago(bind, held)}) OR `;
      const died = `${over} AND owner IS NOT NULL AND claimed_at > ${d.ago(bind, STUCK_KEPT_MS)}`;
      return `${claimed} AND (${holding}(${died} AND NOT ${stepsLive}))`;
    }
    case 'half_done':
      return `state = 'p' AND ${over} AND ${stepsLive}`;
    case 'completed':
      return `state = 'c' AND ${live}`;
  }
}
