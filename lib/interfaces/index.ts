export * from './idempotency-event.interface';
export * from './idempotency-module-options.interface';
export * from './idempotency-options.interface';
export * from './idempotency-run-options.interface';
