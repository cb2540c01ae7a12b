export * from './decorators';
export * from './errors';
export * from './interceptors';
export * from './interfaces';
export * from './services';
export * from './stores';
export {
  IDEMPOTENCY_OPTIONS,
  REPLAYED_HEADER,
  STATUS_HEADER,
  DEFAULT_REPLAY_HEADERS,
} from './idempotency.constants';
export { IdempotencyModule } from './idempotency.module';
export type {
  IdempotencyModuleAsyncOptions,
  IdempotencyModuleRootOptions,
  IdempotencyOptionsFactory,
} from './idempotency.module-definition';
export type { IdempotencyContextAdapter, IdempotencyOutcome } from './adapters/context-adapter';
export type { ResponseSnapshot } from './utils/response-codec';
export { IdempotencyScopeError, PRINCIPAL_ID_FIELDS } from './utils/principal';
export { IdempotencySerializerError } from './interceptors/serializers';
export { rmqManualAck } from './microservices/rmq-manual-ack';
export * from './propagation';
