/** What the MySQL store's lookup and inspect statements return, as the contract's results. */
import type { ClaimResult } from '../idempotency.store';
import type { InspectedRow } from '../sql/sql-dialect';
import { wholeMs } from '../sql/sql-rows';

/** A row of `lookup`: the live record that kept a claim out. */
export interface LookupRow {
  state: string;
  left_us: number | string;
  mismatch: number | string;
  /** 1: the record is this token's claim, sent again. */
  own: number | string | null;
  meta: string | null;
  body: Buffer | null;
}

/** A row of `inspect`: the live record. */
export interface InspectRow {
  state: string;
  meta: string | null;
  bytes: number | string | null;
  left_us: number | string;
  age_us: number | string | null;
}

/** µs from the database (BIGINT: a string when the pool has bigNumberStrings) in ms. */
const ms = (us: number | string | null) => Number(us ?? 0) / 1000;

/** What a claim that found the key held reports of the record that holds it. */
export function heldOutcome(row: LookupRow): ClaimResult {
  if (Number(row.mismatch) === 1) return { status: 'key_reused' };
  if (row.state === 'c') {
    const response = { meta: row.meta ?? '', body: row.body ?? Buffer.alloc(0) };
    return { status: 'completed', response };
  }
  return { status: 'in_progress', retryAfterMs: wholeMs(ms(row.left_us)) };
}

/** A row of `inspect` (undefined: none), in ms. */
export function inspected(row: InspectRow | undefined): InspectedRow | undefined {
  if (!row) return undefined;
  const { state, meta, bytes, left_us, age_us } = row;
  return {
    state: state === 'p' ? 'p' : 'c',
    meta,
    bytes: Number(bytes ?? 0),
    leftMs: ms(left_us),
    ageMs: ms(age_us),
  };
}
