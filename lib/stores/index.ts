export * from './idempotency.store';
export * from './record-listing';
export * from './memory/memory-idempotency.store';
export * from './redis/redis-idempotency.store';
export * from './postgres/postgres-idempotency.store';
export * from './mysql/mysql-idempotency.store';
