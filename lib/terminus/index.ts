export * from './idempotency.health';
