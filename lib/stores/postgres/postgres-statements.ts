/**
 * The PostgreSQL store's statements for one table (each operation one statement), with how each
 * binds its values. Times are always the database's clock. The DDL is in `sql/postgres/`.
 */
import {
  type BatchParams,
  type ClaimParams,
  type CompleteParams,
  type ExtendParams,
  type KeyParams,
  named,
  type OwnerParams,
} from '../sql/sql-dialect';
import { STUCK_KEPT_MS } from '../sql/sql-listing-sql';
import { stepsTable } from '../sql/steps-table';

export const DEFAULT_TABLE = 'idempotency_records';

/** What a notification's first character says happened to the record named by the rest. */
export const enum Outcome {
  Completed = 'c',
  Released = 'r',
  Deleted = 'd',
}

/** `name` as a quoted identifier, each part of a qualified name quoted on its own. */
export function quote(name: string): string {
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}

/** `statement_timestamp() + $n milliseconds`: the database's clock, never the app's. */
export const inMs = (param: string) =>
  `statement_timestamp() + ${param}::float8 * interval '1 millisecond'`;
/** Milliseconds from the statement's time to `column` (negative when it is past). */
export const msUntil = (column: string) =>
  `(extract(epoch FROM ${column} - statement_timestamp()) * 1000)::float8`;

/** The values of a claim (and of a resumable one). */
export const claimValues = (p: ClaimParams) => [
  p.key,
  p.token,
  p.fingerprint,
  p.leaseMs,
  p.waiting ?? false,
  p.about?.route ?? null,
  p.about?.label ?? null,
];

/** The values of a completion (and of one that clears the steps); the channel is the table. */
export const completeValues = (table: string) => (p: CompleteParams) => [
  p.key,
  p.token,
  p.response.meta,
  p.response.body,
  p.ttlMs,
  table,
];

/** The values of an operator's delete (and of one with the steps). */
export const deleteValues = (table: string) => (p: KeyParams) => [p.key, table];

/** The values of a sweep. */
export const batchValues = (p: BatchParams) => [p.batch];

/** The statements of the store for one table, each with the order its `$n` are bound in. */
export function statements(table: string) {
  const t = quote(table);
  return named({
    /**
     * Input: $1 key, $2 owner token, $3 fingerprint ('' = not compared), $4 lease ms,
     * $5 the caller waits (mark the pending record so that its outcome is notified), $6 route
     * and $7 label (what listing shows of it; NULL: none).
     * Output: one row: `claimed`, `marked`, and the live record the statement's snapshot saw
     * (`state` NULL when none; `own`: it is this token's claim, sent again); `meta` and `body`
     * only for a replay, so that a 409 or 422 never reads (or detoasts) a stored body.
     *
     * The INSERT only runs when the snapshot has no live record, so a replay, a 409 or a 422
     * writes nothing (no row lock, no dead tuple, no WAL). ON CONFLICT takes over an expired
     * record, pending or completed, under its row lock: a completion in flight for it (its
     * owner's, maybe inside the app's transaction) commits first or not at all.
     */
    claim: { text: claimSql(t), bind: claimValues },

    /**
     * Input: $1 key, $2 owner token, $3 meta, $4 body, $5 retention ms, $6 channel.
     * Output: `n` 1 stored, 0 not the owner. Fenced by the token only: an expired record nobody
     * took over is still its owner's (a takeover is serialised with this by the row lock).
     * A waited-on record notifies 'c' + key; the body never goes in a notification (8000 bytes
     * at most): waiters claim to replay it. Inside a transaction the NOTIFY leaves at commit.
     * A SELECT over the CTE, so that every driver returns the row (TypeORM does not for UPDATE).
     */
    complete: { text: completeSql(t), bind: completeValues(table) },

    /**
     * Input: $1 key, $2 owner token, $3 channel. Output: `n` 1 released, 0 not the owner. The
     * row stays, its lease ended now and its owner gone (claims take it over as an expired
     * one): with steps left it is a half-done run, listed from now; without, the sweeper's.
     */
    release: {
      text: `WITH ended AS (
  UPDATE ${t} SET owner = NULL, expires_at = statement_timestamp()
  WHERE key = $1 AND state = 'p' AND owner = $2 RETURNING waiting
)
SELECT count(*)::int AS n,
  count(pg_notify($3, '${Outcome.Released}' || $1)) FILTER (WHERE waiting) AS notified
FROM ended`,
      bind: (p: OwnerParams) => [p.key, p.token, table],
    },

    /** Input: $1 key, $2 owner token, $3 lease ms. Affects 1 row when extended. */
    extend: {
      text: `UPDATE ${t} SET expires_at = ${inMs('$3')}
WHERE key = $1 AND state = 'p' AND owner = $2`,
      bind: (p: ExtendParams) => [p.key, p.token, p.leaseMs],
    },

    /** Input: $1 key. Output: the live record, if any; never its body. */
    inspect: {
      text: `SELECT state, meta, octet_length(body) AS bytes, ${msUntil('expires_at')} AS left_ms,
  (extract(epoch FROM statement_timestamp() - completed_at) * 1000)::float8 AS age_ms
FROM ${t} WHERE key = $1 AND expires_at > statement_timestamp()`,
      bind: (p: KeyParams) => [p.key],
    },

    /** Input: $1 key, $2 channel. Output: `n` 1 when a live record was deleted. */
    delete: { text: deleteSql(t), bind: deleteValues(table) },

    /**
     * Input: $1 batch size. Deletes up to that many expired rows, but a claim that died (for
     * listing, as stuck); rows another transaction holds (a takeover, a completion in flight)
     * are skipped, so sweepers of several instances and the request path never wait on each
     * other.
     */
    sweep: { text: sweepSql(t), bind: batchValues },

    /** `sweep`, keeping half-done runs (pending, with live steps) too. */
    sweepRuns: { text: sweepSql(t, quote(stepsTable(table, 63))), bind: batchValues },
  });
}

/**
 * What a resumable claim adds to the claim (postgres-steps.ts); nothing for the others, whose
 * statement stays the text it always was.
 */
export interface ClaimSteps {
  /** A condition the key's steps must meet for the INSERT to run (after the free-key check). */
  free: string;
  /** A condition the expired row must meet to be taken over (after the expiry check). */
  unchanged: string;
  /** Columns after `body`. */
  columns: string;
  /** After the claim's row: more rows (`UNION ALL ...`). */
  rows: string;
}

const NO_STEPS: ClaimSteps = { free: '', unchanged: '', columns: '', rows: '' };

/** The claim statement (see `statements().claim`), with what `steps` adds. */
export function claimSql(t: string, steps: ClaimSteps = NO_STEPS): string {
  return `WITH inserted AS (
  INSERT INTO ${t} AS r (key, state, fingerprint, owner, expires_at, route, label, claimed_at)
  SELECT $1::text, 'p', $3::text, $2::text, ${inMs('$4')}, $6::text, $7::text,
    statement_timestamp()
  WHERE NOT EXISTS (SELECT FROM ${t} WHERE key = $1 AND expires_at > statement_timestamp())${steps.free}
  ON CONFLICT (key) DO UPDATE
    SET state = 'p', fingerprint = excluded.fingerprint, owner = excluded.owner, waiting = false,
      meta = NULL, body = NULL, completed_at = NULL, expires_at = excluded.expires_at,
      route = excluded.route, label = excluded.label, claimed_at = excluded.claimed_at,
      reported = false
    WHERE r.expires_at <= statement_timestamp()${steps.unchanged}
  RETURNING 1
), marked AS (
  UPDATE ${t} SET waiting = true
  WHERE $5::boolean AND key = $1 AND state = 'p' AND NOT waiting
    AND expires_at > statement_timestamp() AND ($3 = '' OR fingerprint IN ('', $3))
  RETURNING 1
)
SELECT EXISTS (SELECT FROM inserted) AS claimed, EXISTS (SELECT FROM marked) AS marked,
  r.state, r.waiting, ${msUntil('r.expires_at')} AS left_ms,
  r.state = 'p' AND r.owner = $2 AS own,
  $3 <> '' AND r.fingerprint <> '' AND r.fingerprint <> $3 AS mismatch,
  CASE WHEN r.state = 'c' AND ($3 = '' OR r.fingerprint IN ('', $3)) THEN r.meta END AS meta,
  CASE WHEN r.state = 'c' AND ($3 = '' OR r.fingerprint IN ('', $3)) THEN r.body END AS body${steps.columns}
FROM (SELECT) AS one
LEFT JOIN ${t} r ON r.key = $1 AND r.expires_at > statement_timestamp()${steps.rows}`;
}

/**
 * The sweeper's statement (see `statements().sweep`): expired rows, but a claim that died
 * unreleased less than {@link STUCK_KEPT_MS} ago (listed as stuck) and, with the steps table
 * `s`, a pending row whose key has live steps (a half-done run).
 */
function sweepSql(t: string, s?: string): string {
  const halfDone = s
    ? `
    AND NOT EXISTS (SELECT FROM ${s} s WHERE s.key = r.key AND s.expires_at > statement_timestamp())`
    : '';
  return `DELETE FROM ${t} WHERE ctid = ANY (ARRAY (
  SELECT ctid FROM ${t} r WHERE expires_at <= statement_timestamp()
    AND NOT (state = 'p' AND owner IS NOT NULL AND claimed_at IS NOT NULL
      AND claimed_at > statement_timestamp() - interval '${STUCK_KEPT_MS} milliseconds')${halfDone}
  LIMIT $1 FOR UPDATE SKIP LOCKED
))`;
}

/** The completion statement (see `statements().complete`), with `also`: more CTEs. */
export function completeSql(t: string, also = ''): string {
  return `WITH done AS (
  UPDATE ${t} SET state = 'c', owner = NULL, meta = $3, body = $4,
    completed_at = statement_timestamp(), expires_at = ${inMs('$5')}
  WHERE key = $1 AND state = 'p' AND owner = $2
  RETURNING waiting
)${also}
SELECT count(*)::int AS n,
  count(pg_notify($6, '${Outcome.Completed}' || $1)) FILTER (WHERE waiting) AS notified
FROM done`;
}

/**
 * The operators' delete (see `statements().delete`), with `also`: more CTEs, and `columns`:
 * more output columns.
 */
export function deleteSql(t: string, also = '', columns = ''): string {
  return `WITH gone AS (
  DELETE FROM ${t} WHERE key = $1 RETURNING expires_at > statement_timestamp() AS live
)${also}
SELECT (count(*) FILTER (WHERE live))::int AS n,
  count(pg_notify($2, '${Outcome.Deleted}' || $1)) AS notified${columns}
FROM gone`;
}

export type Statements = ReturnType<typeof statements>;
