export * from './idempotency-records.service';
export * from './idempotency.service';
export type {
  IdempotencyRecordCounts,
  IdempotencyRecordListItem,
  IdempotencyRecordListPage,
  IdempotencyRecordListQuery,
} from './record-list';
