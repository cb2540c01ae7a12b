import { Reflector } from '@nestjs/core';
import type { IdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { resolveRouteOptions } from '../options';

/**
 * The metadata `@Idempotent()` sets on a handler or controller: its validated options. Kept apart
 * from the decorator, which binds the interceptor, so that the interceptor can read it. Its names
 * and values are checked when the decorator is evaluated.
 */
export const IdempotentOptions = Reflector.createDecorator<
  IdempotencyOptions | false,
  IdempotencyOptions
>({
  // `@Idempotent(false)` is `@Idempotent({ enabled: false })`.
  transform: (options) =>
    resolveRouteOptions(options === false ? { enabled: false } : (options ?? {}), '@Idempotent()'),
});
