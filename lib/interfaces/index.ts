export * from './idempotency-event.interface';
export * from './idempotency-options.interface';
