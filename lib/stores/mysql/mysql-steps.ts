/**
 * The MySQL/MariaDB store's steps (recovery points of resumable runs): the steps table beside
 * the records' table (`sql/mysql/002_idempotency_steps.sql`), and the statements of resumable
 * runs and operators that touch it. Runs that are not resumable never send these: their
 * statements are `mysqlStatements()`'s, unchanged.
 */
import type { StoredStep } from '../idempotency.store';
import { named, type StepParams } from '../sql/sql-dialect';
import { stepsTable } from '../sql/steps-table';
import {
  batchValues,
  completeSql,
  completeValues,
  keyValues,
  LATER,
  NOW,
  quoteMysql,
  us,
} from './mysql-statements';

/**
 * The steps table of the records' table `table`: `<table>_steps` in the same database, cut and
 * hashed to fit when that is longer than MySQL keeps (64 characters).
 */
export function mysqlStepsTableName(table: string): string {
  return stepsTable(table, 64);
}

/** The statements that read or write the steps of `table`'s records. */
export function mysqlStepStatements(table: string) {
  const t = quoteMysql(table);
  const s = quoteMysql(mysqlStepsTableName(table));
  return named({
    /**
     * Input: key. Output: the key's live steps, in index order. The second statement of a
     * resumable claim that took the key (MySQL's INSERT returns no rows): it reads what was
     * committed before, so a step an owner whose lease expired recorded in a transaction that
     * the takeover waited for (recordStep locks the record's row) is there.
     */
    claimedSteps: {
      steps: true,
      bind: keyValues,
      text: `SELECT idx, name, fingerprint, meta, body FROM ${s}
WHERE \`key\` = ? AND expires_at > ${NOW} ORDER BY idx`,
    },

    /**
     * Input: index, name, meta, body, retention µs, key, token. Affects 1 row (2 when it replaced
     * the step at that index) when recorded, 0 when `token` no longer owns the pending record
     * (fenced by the token, as a completion is). The step carries the record's fingerprint.
     * FOR UPDATE: a locking read of the record's row, so that a takeover (which updates it)
     * waits for this step's transaction, and this waits for a takeover's and then finds the
     * new owner. A plain INSERT ... SELECT reads a snapshot in READ COMMITTED: it would record
     * a zombie's step after the takeover, unseen by the new owner.
     */
    recordStep: {
      steps: true,
      bind: stepValues,
      text: `REPLACE INTO ${s} (\`key\`, idx, name, fingerprint, meta, body, expires_at)
SELECT \`key\`, ?, ?, fingerprint, ?, ?, ${LATER} FROM ${t}
WHERE \`key\` = ? AND state = 'p' AND owner = ? FOR UPDATE`,
    },

    /** `mysqlStatements().complete`, the key's steps expiring with it (clearSteps). */
    completeClearing: { steps: true, bind: completeValues, text: completeSql(t, s) },

    /**
     * Input: key. Affects the key's live steps (an operator's delete); expired ones are dead
     * already, and the sweeper's.
     */
    deleteSteps: {
      steps: true,
      bind: keyValues,
      text: `DELETE FROM ${s} WHERE \`key\` = ? AND expires_at > ${NOW}`,
    },

    /** Input: key. Output: the key's live steps (index and name), in index order. */
    inspectSteps: {
      steps: true,
      bind: keyValues,
      text: `SELECT idx, name FROM ${s} WHERE \`key\` = ? AND expires_at > ${NOW} ORDER BY idx`,
    },

    /** Input: batch size. As `mysqlStatements().sweep`, for expired steps. */
    sweepSteps: {
      steps: true,
      bind: batchValues,
      text: `DELETE FROM ${s} WHERE expires_at <= ${NOW} ORDER BY expires_at LIMIT ?`,
    },
  });
}

export type MysqlStepStatements = ReturnType<typeof mysqlStepStatements>;

/** A row of `claimedSteps`. */
export interface StepRow {
  idx: number;
  name: string;
  fingerprint: Buffer | string;
  meta: string;
  body: Buffer;
}

/** Whether a step was recorded under another fingerprint than `fingerprint` ('' matches any). */
export function foreign(row: StepRow, fingerprint: string): boolean {
  const recorded = String(row.fingerprint);
  return fingerprint !== '' && recorded !== '' && recorded !== fingerprint;
}

/** `rows` as steps; undefined when there are none. */
export function storedSteps(rows: StepRow[]): StoredStep[] | undefined {
  if (rows.length === 0) return undefined;
  return rows.map((row) => ({
    index: Number(row.idx),
    name: row.name,
    result: { meta: row.meta, body: row.body },
  }));
}

/** The values of recordStep, in its placeholders' order. */
function stepValues({ key, token, step, ttlMs }: StepParams): unknown[] {
  const { meta, body } = step.result;
  return [step.index, step.name, meta, body, us(ttlMs), key, token];
}
