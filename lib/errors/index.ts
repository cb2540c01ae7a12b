export * from './idempotency.errors';
