import { Reflector } from '@nestjs/core';
import type { IdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { validateOptions } from '../options/options';

/**
 * The metadata `@Idempotent()` sets on a handler or controller: its validated options. Kept apart
 * from the decorator, which binds the interceptor, so that the interceptor can read it.
 */
export const IdempotentOptions = Reflector.createDecorator<
  IdempotencyOptions | false,
  IdempotencyOptions
>({
  // `@Idempotent(false)` is `@Idempotent({ enabled: false })`.
  transform: (options) =>
    validateOptions(options === false ? { enabled: false } : { ...options }, '@Idempotent()'),
});
