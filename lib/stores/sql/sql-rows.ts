/** What the SQL stores' rows say, as the contract's results. */
import type { RecordedStep, RecordInspection } from '../idempotency.store';
import type { InspectedRow } from './sql-dialect';

/** A duration from the database in whole ms, never negative. */
export const wholeMs = (ms: number) => Math.max(Math.floor(ms), 0);

/** What inspect reports of `row` (undefined: no live record) and the key's steps. */
export function inspection(row: InspectedRow | undefined, steps: RecordedStep[]): RecordInspection {
  const named = <T extends RecordInspection>(result: T): T =>
    steps.length > 0 ? { ...result, steps } : result;
  if (!row) return named({ state: 'absent' });
  const ttlMsLeft = wholeMs(row.leftMs);
  if (row.state === 'p') return named({ state: 'pending', leaseMsLeft: ttlMsLeft });
  return {
    state: 'completed',
    meta: row.meta ?? '',
    bytes: row.bytes,
    ageMs: wholeMs(row.ageMs),
    ttlMsLeft,
  };
}
