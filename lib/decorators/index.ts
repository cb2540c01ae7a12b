export * from './idempotent.decorator';
