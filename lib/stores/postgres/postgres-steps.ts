/**
 * The PostgreSQL store's steps (recovery points of resumable runs): the steps table beside the
 * records' table (`sql/postgres/002_idempotency_steps.sql`), and the statements of resumable runs
 * and operators that touch it. Runs that are not resumable never send these: their statements
 * are `statements()`'s, unchanged.
 */
import type { StoredStep } from '../idempotency.store';
import { type KeyParams, named, type StepParams } from '../sql/sql-dialect';
import { stepsTable } from '../sql/steps-table';
import {
  batchValues,
  claimSql,
  claimValues,
  completeSql,
  completeValues,
  deleteSql,
  deleteValues,
  inMs,
  quote,
} from './postgres-statements';

/**
 * The steps table of the records' table `table`: `<table>_steps` in the same schema, cut and
 * hashed to fit when that is longer than PostgreSQL keeps (63 bytes).
 */
export function postgresStepsTableName(table: string): string {
  return stepsTable(table, 63);
}

/** The statements that read or write the steps of `table`'s records. */
export function stepStatements(table: string) {
  const t = quote(table);
  const s = quote(postgresStepsTableName(table));
  /** The caller's own live claim of the key: its claim sent again. */
  const own = `SELECT FROM ${t} WHERE key = $1 AND state = 'p' AND owner = $2
      AND expires_at > statement_timestamp()`;
  /** Live steps of the key ($1) recorded under another fingerprint than the caller's ($3). */
  const foreign = `SELECT FROM ${s} WHERE key = $1 AND expires_at > statement_timestamp()
      AND $3 <> '' AND fingerprint NOT IN ('', $3)`;
  return named({
    /**
     * The claim of a resumable run: `statements().claim`, and in the same statement the steps
     * earlier runs recorded under the key. Input: as the claim. Output: the claim's row, with
     * `foreign_steps` (the key is free but its steps belong to another payload: nothing was
     * inserted, key_reused); then, when it took the key (or holds it: its claim sent again),
     * one row per live step (`step_*`, the claim's columns NULL). Rows, not arrays: node-postgres parses a bytea[] character by
     * character, some 40 times slower than a bytea column.
     *
     * The steps are read under the statement's snapshot. A step committed after it, by an owner
     * whose lease has expired, locked the record's row and changed it (see recordStep): the
     * takeover waits for that commit, then finds the row no longer the version its snapshot
     * saw (xmin), leaves it, and the claim runs again (new statement, new snapshot) and sees the
     * step. Without that, the new owner would run again a step whose marker had committed.
     */
    claimResumable: {
      steps: true,
      bind: claimValues,
      text: claimSql(t, {
        free: `\n    AND NOT EXISTS (${foreign})`,
        unchanged: `\n      AND r.xmin = (SELECT xmin FROM ${t} WHERE key = $1)`,
        columns: `,
  NOT EXISTS (SELECT FROM inserted) AND EXISTS (${foreign}) AS foreign_steps,
  NULL::int AS step_idx, NULL::text AS step_name, NULL::text AS step_meta,
  NULL::bytea AS step_body`,
        rows: `
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, idx, name, meta, body
FROM ${s} WHERE key = $1 AND expires_at > statement_timestamp()
  AND (EXISTS (SELECT FROM inserted) OR EXISTS (${own}))`,
      }),
    },

    /**
     * Input: $1 key, $2 owner token, $3 index, $4 name, $5 meta, $6 body, $7 retention ms.
     * Output: `n` 1 recorded, 0 not the owner (fenced by the token, as a completion is). The
     * step carries the record's fingerprint. The UPDATE changes nothing but locks the record's
     * row and gives it a new version: a takeover in flight waits for this step's commit (inside
     * the app's transaction, the step's writes commit with it) and then claims again, seeing
     * it (see claimResumable); a takeover first makes this find another owner.
     */
    recordStep: {
      steps: true,
      bind: stepValues,
      text: `WITH owner AS (
  UPDATE ${t} SET owner = owner WHERE key = $1 AND state = 'p' AND owner = $2
  RETURNING fingerprint
), recorded AS (
  INSERT INTO ${s} (key, idx, name, fingerprint, meta, body, expires_at)
  SELECT $1::text, $3::int, $4::text, fingerprint, $5::text, $6::bytea, ${inMs('$7')} FROM owner
  ON CONFLICT (key, idx) DO UPDATE SET name = excluded.name, fingerprint = excluded.fingerprint,
    meta = excluded.meta, body = excluded.body, expires_at = excluded.expires_at
  RETURNING 1
)
SELECT count(*)::int AS n FROM recorded`,
    },

    /** `statements().complete`, and the key's steps deleted when it completes (clearSteps). */
    completeClearing: {
      steps: true,
      bind: completeValues(table),
      text: completeSql(
        t,
        `, cleared AS (
  DELETE FROM ${s} WHERE key = $1 AND EXISTS (SELECT FROM done)
)`,
      ),
    },

    /**
     * `statements().delete`, and the key's steps, live record or not. Output: also `steps`, the
     * live steps deleted (a released record's count as something deleted).
     */
    deleteWithSteps: {
      steps: true,
      bind: deleteValues(table),
      text: deleteSql(
        t,
        `, steps AS (
  DELETE FROM ${s} WHERE key = $1 RETURNING expires_at > statement_timestamp() AS live
)`,
        `,
  (SELECT count(*) FILTER (WHERE live) FROM steps)::int AS steps`,
      ),
    },

    /** Input: $1 key. Output: the key's live steps (index and name), in index order. */
    inspectSteps: {
      steps: true,
      bind: (p: KeyParams) => [p.key],
      text: `SELECT idx, name FROM ${s}
WHERE key = $1 AND expires_at > statement_timestamp() ORDER BY idx`,
    },

    /** Input: $1 batch size. As `statements().sweep`, for expired steps. */
    sweepSteps: {
      steps: true,
      bind: batchValues,
      text: `DELETE FROM ${s} WHERE ctid = ANY (ARRAY (
  SELECT ctid FROM ${s} WHERE expires_at <= statement_timestamp()
  LIMIT $1 FOR UPDATE SKIP LOCKED
))`,
    },
  });
}

export type StepStatements = ReturnType<typeof stepStatements>;

/** A row of a resumable claim: the claim's (`claimed` not NULL), or a step's. */
export interface StepRow {
  claimed: boolean | null;
  step_idx: number | null;
  step_name: string | null;
  step_meta: string | null;
  step_body: Buffer | null;
}

/** The steps among a resumable claim's rows, in index order; undefined when there are none. */
export function claimedSteps(rows: StepRow[]): StoredStep[] | undefined {
  const steps: StoredStep[] = [];
  for (const row of rows) {
    if (row.claimed !== null) continue;
    const result = { meta: row.step_meta!, body: row.step_body! };
    steps.push({ index: row.step_idx!, name: row.step_name!, result });
  }
  return steps.length > 0 ? steps.sort((a, b) => a.index - b.index) : undefined;
}

/** The values of recordStep, in its parameters' order. */
function stepValues({ key, token, step, ttlMs }: StepParams): unknown[] {
  return [key, token, step.index, step.name, step.result.meta, step.result.body, ttlMs];
}
