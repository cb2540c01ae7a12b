/**
 * The MySQL/MariaDB store's statements for one table, with how each binds its values. Times are the database's clock (`UTC_TIMESTAMP(6)`: fixed for a statement, and independent of
 * the session's time zone), durations are bound in microseconds. Placeholders are `?`, bound in
 * the order the store passes them (MySQL has no numbered parameters, so some repeat).
 *
 * Needs MySQL 5.7.7+ (8.0, 8.4, 9.x) or MariaDB 10.2+: DATETIME(6), a 512-byte primary key
 * (InnoDB's DYNAMIC rows, the default since 5.7.7), DELETE ... ORDER BY ... LIMIT. No VALUES()
 * in ON DUPLICATE KEY UPDATE (deprecated since MySQL 8.0.20) and no RETURNING (MySQL has none).
 * The DDL is in `sql/mysql/`.
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

export const DEFAULT_MYSQL_TABLE = 'idempotency_records';

/** `name` as a quoted identifier, each part of a qualified name quoted on its own. */
export function quoteMysql(name: string): string {
  return name
    .split('.')
    .map((part) => `\`${part}\``)
    .join('.');
}

export const NOW = 'UTC_TIMESTAMP(6)';
const EXPIRED = `expires_at <= ${NOW}`;
/** `NOW + ? microseconds`. */
export const LATER = `${NOW} + INTERVAL ? MICROSECOND`;
/** The stored response, only when the caller's fingerprint matches (`?` twice: fingerprint). */
const MATCHES = `state = 'c' AND (? = '' OR fingerprint IN ('', ?))`;

/** `ms` in microseconds, as the statements bind durations. */
export const us = (ms: number) => ms * 1000;

/** The values of a completion (and of one that expires the steps). */
export const completeValues = (p: CompleteParams) => [
  p.response.meta,
  p.response.body,
  us(p.ttlMs),
  p.key,
  p.token,
];

/** The values of a statement on one key. */
export const keyValues = (p: KeyParams) => [p.key];

/** The values of a sweep. */
export const batchValues = (p: BatchParams) => [p.batch];

/** The statements of the store for one table, each with the order its `?` are bound in. */
export function mysqlStatements(table: string) {
  const t = quoteMysql(table);
  return named({
    /**
     * Input: key, fingerprint, token, route, label, lease µs; then, for the takeover: the same
     * but the key. Output: the OK packet. Inserts a pending record, or takes over an expired one
     * under its row lock (a completion in flight, maybe inside the app's transaction, commits
     * first or not at all). A live record is left as it is, and the statement says so through
     * LAST_INSERT_ID(1): `insertId` 1 means not claimed, 0 claimed. (`affectedRows` cannot
     * tell: with the CLIENT_FOUND_ROWS flag, mysql2's default, an unchanged row counts 1, as an
     * insert does.) Assignments run left to right and later ones see earlier ones, so
     * expires_at comes last: every IF before it reads the old expiry. Route and label (NULL:
     * none) are what listing shows of the claim.
     */
    claim: {
      bind: ({ key, fingerprint, token, leaseMs, about }: ClaimParams) => {
        const claim = [fingerprint, token, about?.route ?? null, about?.label ?? null, us(leaseMs)];
        return [key, ...claim, ...claim];
      },
      text: `INSERT INTO ${t} (\`key\`, state, fingerprint, owner, route, label, claimed_at, expires_at)
VALUES (?, 'p', ?, ?, ?, ?, ${NOW}, ${LATER})
ON DUPLICATE KEY UPDATE
  state = IF(${EXPIRED}, 'p', state),
  fingerprint = IF(${EXPIRED}, ?, fingerprint),
  owner = IF(${EXPIRED}, ?, owner),
  meta = IF(${EXPIRED}, NULL, meta),
  body = IF(${EXPIRED}, NULL, body),
  completed_at = IF(${EXPIRED}, NULL, completed_at),
  route = IF(${EXPIRED}, ?, route),
  label = IF(${EXPIRED}, ?, label),
  claimed_at = IF(${EXPIRED}, ${NOW}, claimed_at),
  reported = IF(${EXPIRED}, FALSE, reported),
  expires_at = IF(${EXPIRED}, ${LATER}, IF(LAST_INSERT_ID(1), expires_at, expires_at))`,
    },

    /**
     * Input: fingerprint x2, token, fingerprint x4, key. Output: the live record that kept a
     * claim out (`own`: it is this token's claim, sent again); `meta` and `body` only for a
     * replay, so a 409 or 422 never reads a stored body. The claim's second statement, only when
     * the key is held: MySQL's INSERT cannot return the row it did not change.
     */
    lookup: {
      bind: ({ key, token, fingerprint: f }: ClaimParams) => [f, f, token, f, f, f, f, key],
      text: `SELECT state, TIMESTAMPDIFF(MICROSECOND, ${NOW}, expires_at) AS left_us,
  (? <> '' AND fingerprint <> '' AND fingerprint <> ?) AS mismatch,
  (state = 'p' AND owner = ?) AS own,
  IF(${MATCHES}, meta, NULL) AS meta, IF(${MATCHES}, body, NULL) AS body
FROM ${t} WHERE \`key\` = ? AND expires_at > ${NOW}`,
    },

    /**
     * Input: meta, body, retention µs, key, token. Affects 1 row when stored, 0 when `token` no
     * longer owns the pending record (fencing; an expired record nobody took over is still its
     * owner's, and a takeover is serialised with this by the row lock).
     */
    complete: { text: completeSql(t), bind: completeValues },

    /**
     * Input: key, token. Affects 1 row when released. The row stays, its lease ended now and its
     * owner gone (claims take it over as an expired one): with steps left it is a half-done
     * run, listed from now; without, the sweeper's.
     */
    release: {
      text: `UPDATE ${t} SET owner = NULL, expires_at = ${NOW}
WHERE \`key\` = ? AND state = 'p' AND owner = ?`,
      bind: (p: OwnerParams) => [p.key, p.token],
    },

    /** Input: lease µs, key, token. Affects 1 row when extended. */
    extend: {
      text: `UPDATE ${t} SET expires_at = ${LATER} WHERE \`key\` = ? AND state = 'p' AND owner = ?`,
      bind: (p: ExtendParams) => [us(p.leaseMs), p.key, p.token],
    },

    /** Input: key. Output: the live record, if any; never its body. */
    inspect: {
      bind: keyValues,
      text: `SELECT state, meta, OCTET_LENGTH(body) AS bytes,
  TIMESTAMPDIFF(MICROSECOND, ${NOW}, expires_at) AS left_us,
  TIMESTAMPDIFF(MICROSECOND, completed_at, ${NOW}) AS age_us
FROM ${t} WHERE \`key\` = ? AND expires_at > ${NOW}`,
    },

    /** Input: key. Affects 1 row when a live record was deleted. */
    deleteLive: {
      text: `DELETE FROM ${t} WHERE \`key\` = ? AND expires_at > ${NOW}`,
      bind: keyValues,
    },

    /** Input: key. An expired record's row, so that its zombie owner cannot complete it. */
    deleteAny: { text: `DELETE FROM ${t} WHERE \`key\` = ?`, bind: keyValues },

    /**
     * Input: batch size. Deletes up to that many expired rows, oldest first, but a claim that
     * died (for listing, as stuck). DELETE has no SKIP LOCKED: a row a transaction holds (a
     * completion in flight) makes it wait for that commit, then it re-reads the row and leaves
     * it when it is live again.
     */
    sweep: { text: sweepSql(t), bind: batchValues },

    /** `sweep`, keeping half-done runs (pending, with live steps) too. */
    sweepRuns: { text: sweepSql(t, quoteMysql(stepsTable(table, 64))), bind: batchValues },
  });
}

/** Input: keys. Output: those whose record is still pending (the waiters' poll). */
export function pendingSql(table: string, count: number) {
  return `SELECT \`key\` FROM ${quoteMysql(table)} WHERE \`key\` IN (${Array(count).fill('?').join(', ')})
  AND state = 'p' AND expires_at > ${NOW}`;
}

export type MysqlStatements = ReturnType<typeof mysqlStatements>;

/**
 * The sweeper's statement (see `mysqlStatements().sweep`): expired rows, but a claim that died
 * unreleased less than {@link STUCK_KEPT_MS} ago (listed as stuck) and, with the steps table
 * `s`, a pending row whose key has live steps (a half-done run).
 */
function sweepSql(t: string, s?: string): string {
  const halfDone = s
    ? `
  AND NOT EXISTS (SELECT 1 FROM ${s} s WHERE s.\`key\` = ${t}.\`key\` AND s.expires_at > ${NOW})`
    : '';
  return `DELETE FROM ${t} WHERE ${EXPIRED}
  AND NOT (state = 'p' AND owner IS NOT NULL AND claimed_at IS NOT NULL
    AND claimed_at > ${NOW} - INTERVAL ${STUCK_KEPT_MS * 1000} MICROSECOND)${halfDone}
ORDER BY expires_at LIMIT ?`;
}

/**
 * The completion statement (see `mysqlStatements().complete`); with `steps`, the steps table,
 * the key's steps expire with it, in the same statement (MySQL has no statement that updates one
 * table and deletes from another: their rows are dead at once, and the sweeper deletes them).
 * Affects 1 row or more when stored, 0 when `token` no longer owns the pending record.
 */
export function completeSql(t: string, steps?: string): string {
  // Both tables have `key` and expires_at: with the join, every column is qualified.
  const r = steps ? 'r.' : '';
  const join = steps ? ` r LEFT JOIN ${steps} s ON s.\`key\` = r.\`key\`` : '';
  const expire = steps ? `, s.expires_at = ${NOW}` : '';
  return `UPDATE ${t}${join} SET ${r}state = 'c', ${r}owner = NULL, ${r}meta = ?, ${r}body = ?,
  ${r}completed_at = ${NOW}, ${r}expires_at = ${LATER}${expire}
WHERE ${r}\`key\` = ? AND ${r}state = 'p' AND ${r}owner = ?`;
}
