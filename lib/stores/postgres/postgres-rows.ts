/** What the PostgreSQL store's claim and inspect statements return, as the contract's results. */
import type { ClaimResult } from '../idempotency.store';
import type { InspectedRow } from '../sql/sql-dialect';
import { wholeMs } from '../sql/sql-rows';
import { claimedSteps, type StepRow } from './postgres-steps';

/** The row of `claim` (and the rows of `claimResumable`, which add the steps'). */
export interface ClaimRow {
  claimed: boolean;
  marked: boolean;
  state: 'p' | 'c' | null;
  waiting: boolean | null;
  left_ms: number | null;
  /** The live record is this token's claim: the claim was sent again. */
  own: boolean | null;
  mismatch: boolean | null;
  meta: string | null;
  body: Buffer | null;
  /** Resumable claims only: the key is free, but its steps belong to another payload. */
  foreign_steps?: boolean;
}

/** The row of `inspect`, for a live record. */
export interface InspectRow {
  state: 'p' | 'c';
  meta: string | null;
  bytes: number | null;
  left_ms: number;
  age_ms: number | null;
}

/**
 * The claim's result, or undefined when the statement lost a race and must run again: in READ
 * COMMITTED its snapshot may miss a record a concurrent claim committed after it began (the
 * INSERT conflicts with it and waits for it, but the SELECT cannot see it), or a waiter's record
 * completed or was released under its snapshot (the mark found no pending row to mark).
 */
export function claimOutcome(rows: ClaimRow[], waiting: boolean): ClaimResult | undefined {
  const row = rows.length === 1 ? rows[0] : rows.find((one) => one.claimed !== null)!;
  if (row.claimed || row.own) {
    const steps = rows.length > 1 ? claimedSteps(rows as unknown as StepRow[]) : undefined;
    return steps ? { status: 'claimed', steps } : { status: 'claimed' };
  }
  if (row.mismatch || (row.foreign_steps && row.state === null)) return { status: 'key_reused' };
  if (row.state === 'c') {
    const response = { meta: row.meta ?? '', body: row.body ?? Buffer.alloc(0) };
    return { status: 'completed', response };
  }
  const raced = row.state === null || (waiting && !row.waiting && !row.marked);
  if (raced) return undefined;
  return { status: 'in_progress', retryAfterMs: wholeMs(row.left_ms!) };
}

/** A row of `inspect` (undefined: none), in ms. */
export function inspected(row: InspectRow | undefined): InspectedRow | undefined {
  if (!row) return undefined;
  const { state, meta, bytes, left_ms, age_ms } = row;
  return { state, meta, bytes: bytes ?? 0, leftMs: left_ms, ageMs: age_ms ?? 0 };
}
