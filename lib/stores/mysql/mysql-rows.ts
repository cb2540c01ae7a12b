/** What the MySQL store's lookup and inspect statements return, as the contract's results. */
import type { ClaimResult, RecordedStep, RecordInspection } from '../idempotency.store';

/** A row of `lookup`: the live record that kept a claim out. */
export interface LookupRow {
  state: string;
  left_us: number | string;
  mismatch: number | string;
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

/** µs from the database (BIGINT: a string when the pool has bigNumberStrings) in whole ms. */
const ms = (us: number | string | null) => Math.max(Math.floor(Number(us ?? 0) / 1000), 0);

/** What a claim that found the key held reports of the record that holds it. */
export function heldOutcome(row: LookupRow): ClaimResult {
  if (Number(row.mismatch) === 1) return { status: 'key_reused' };
  if (row.state === 'c') {
    const response = { meta: row.meta ?? '', body: row.body ?? Buffer.alloc(0) };
    return { status: 'completed', response };
  }
  return { status: 'in_progress', retryAfterMs: ms(row.left_us) };
}

/** What inspect reports of `row` (undefined: no live record) and the key's steps. */
export function inspection(row: InspectRow | undefined, steps: RecordedStep[]): RecordInspection {
  const named = <T extends RecordInspection>(result: T): T =>
    steps.length > 0 ? { ...result, steps } : result;
  if (!row) return named({ state: 'absent' });
  if (row.state === 'p') return named({ state: 'pending', leaseMsLeft: ms(row.left_us) });
  return {
    state: 'completed',
    meta: row.meta ?? '',
    bytes: Number(row.bytes ?? 0),
    ageMs: ms(row.age_us),
    ttlMsLeft: ms(row.left_us),
  };
}
