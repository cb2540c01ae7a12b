export * from './idempotency.errors';
export {
  DEFAULT_PROBLEM_TYPE_BASE,
  IDEMPOTENCY_HTTP_STATUS,
  type IdempotencyProblemDetails,
} from './http-status';
