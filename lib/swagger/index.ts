export * from './api-idempotent.decorator';
