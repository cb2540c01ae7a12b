export * from './idempotent.decorator';
export * from './idempotent-method.decorator';
