import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyKeyValue } from '../interfaces/idempotency-options.interface';

/**
 * A `key` option that reads the key from the request's input at a dotted path, instead of the
 * `Idempotency-Key` header: a GraphQL mutation's arguments (`'input.requestId'`), a gRPC or
 * microservice message (`'requestId'`), an HTTP body. Undefined when a step is missing; a value
 * that is not a string or number is passed on as it is, and refused as an invalid key (400,
 * `IDEMPOTENCY_KEY_INVALID`).
 *
 * @example
 * ```ts
 * @Idempotent({ key: keyFromArgument('input.requestId') })
 * ```
 */
export function keyFromArgument(path: string): (context: ExecutionContext) => IdempotencyKeyValue {
  const steps = path.split('.');
  if (steps.some((step) => step === '')) {
    throw new Error(`keyFromArgument: '${path}' is not a dotted path (e.g. 'input.requestId')`);
  }
  return (context) => {
    const type = context.getType<string>();
    let value: unknown =
      type === 'graphql'
        ? context.getArgByIndex(1)
        : type === 'http'
          ? context.switchToHttp().getRequest<{ body?: unknown }>().body
          : context.getArgByIndex(0);
    for (const step of steps) {
      if (value === null || typeof value !== 'object' || !Object.hasOwn(value, step)) {
        return undefined;
      }
      value = (value as Record<string, unknown>)[step];
    }
    return value as IdempotencyKeyValue;
  };
}
