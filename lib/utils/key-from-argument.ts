import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyKeyValue } from '../interfaces/idempotency-options.interface';
import { parseDottedPath, valueAtPath } from './dotted-path';

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
  const steps = parseDottedPath(path, 'keyFromArgument', 'input.requestId');
  return (context) => {
    const type = context.getType<string>();
    const input: unknown =
      type === 'graphql'
        ? context.getArgByIndex(1)
        : type === 'http'
          ? context.switchToHttp().getRequest<{ body?: unknown }>().body
          : context.getArgByIndex(0);
    return valueAtPath(input, steps) as IdempotencyKeyValue;
  };
}
