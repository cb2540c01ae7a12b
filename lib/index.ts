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
export { IdempotencyScopeError, PRINCIPAL_ID_FIELDS, requestPrincipal } from './utils/principal';
export { IdempotencySerializerError } from './interceptors/serializers';
export { rmqManualAck } from './consumers/rmq-manual-ack';
export { kafkaMessageKey } from './consumers/kafka-message-key';
// SQS consumers (sqs-consumer, @ssut/nestjs-sqs): structural types, nothing loaded at runtime.
export * from './consumers/sqs';
export { DIAGNOSTICS_CHANNEL_PREFIX } from './core/outcome-events';
export { keyFromArgument } from './utils/key-from-argument';
export { GRPC_RETRY_AFTER_METADATA, GRPC_STATUS } from './adapters/grpc-context.adapter';
export * from './propagation';
// The operator page (opt-in): server-rendered, served by the app behind its own guards.
export * from './operator-page';
