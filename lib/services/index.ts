export * from './idempotency-records.service';
export * from './idempotency.service';
