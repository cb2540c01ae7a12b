import type { IdempotencyRecordState } from '../services/idempotency-records.service';
import type { ListedState } from '../stores/record-listing';

/** A list query of `IdempotencyRecords.list()`, as the page sends it. */
export interface PageListQuery {
  state: ListedState;
  route?: string;
  olderThan?: number;
  newerThan?: number;
  order?: 'newest' | 'oldest';
  limit?: number;
  cursor?: string;
  keyPrefix?: string;
}

/** One listed record, as `IdempotencyRecords.list()` returns it (the fields the page shows). */
export interface PageListItem {
  ref: string;
  key?: string;
  route?: string;
  user?: { id: string };
  tenant?: string;
  keyPrefix: string;
  state: ListedState;
  ageMs: number;
  leaseMsLeft?: number;
  steps?: { index: number; name: string }[];
  status?: number;
  error?: boolean;
  reported?: boolean;
}

/**
 * What the page asks of `IdempotencyRecords`, and nothing more: the page reads records through
 * the service like any other caller, and its tests can hand it any provider of these four.
 */
export interface RecordsReader {
  list(query: PageListQuery): Promise<{ items: PageListItem[]; cursor?: string }>;
  counts(keyPrefix?: string): Promise<Record<ListedState, number>>;
  inspect(item: { ref: string }): Promise<IdempotencyRecordState>;
  delete(item: { ref: string }): Promise<boolean>;
}
