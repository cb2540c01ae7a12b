import type { IdempotencyRecords } from '../services/idempotency-records.service';

/**
 * What the page asks of `IdempotencyRecords`, and nothing more: the page reads records through
 * the service like any other caller, and a test can hand it any provider of these four.
 */
export type RecordsReader = Pick<IdempotencyRecords, 'list' | 'counts' | 'inspect' | 'delete'>;
