import { Reflector } from '@nestjs/core';
import type { IdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { validateOptions } from '../utils/options';

/**
 * Makes a handler (or every handler of a controller) idempotent: a request carrying an
 * idempotency key runs the handler once; retries get the stored response replayed.
 *
 * Options override the module's defaults; a method's options override its controller's.
 * Invalid options throw when the class is loaded, not on the first request.
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent({ required: true, ttl: 3_600_000 })
 * create(@Body() dto: CreatePaymentDto) {}
 * ```
 */
export const Idempotent = Reflector.createDecorator<IdempotencyOptions, IdempotencyOptions>({
  transform: (options) => validateOptions({ ...options }, '@Idempotent()'),
});
