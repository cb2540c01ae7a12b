export { IdempotentSqsMessage } from './idempotent-sqs-message.decorator';
export {
  idempotentSqsHandler,
  type IdempotentSqsHandler,
  type IdempotentSqsOptions,
} from './sqs-handler';
export { type SqsKeySource, type SqsMessage, sqsMessageKey } from './sqs-message';
