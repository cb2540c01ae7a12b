export * from './idempotency-records.service';
