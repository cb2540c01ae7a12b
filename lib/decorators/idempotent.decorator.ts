import { applyDecorators, UseInterceptors } from '@nestjs/common';
import { IdempotencyInterceptor } from '../interceptors/idempotency.interceptor';
import type { IdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { IdempotentOptions } from './idempotent-options.metadata';

/**
 * Makes a handler (or every handler of a controller) idempotent: a request carrying an
 * idempotency key runs the handler once; retries get the stored response replayed.
 *
 * It binds {@link IdempotencyInterceptor} to the route itself, so routes without it never pass
 * through an interceptor (Nest's interceptor pipeline costs every route it wraps; measured at a
 * third of a trivial route's throughput). Options override the module's defaults; a method's
 * options override its controller's. Invalid options throw when the class is loaded, not on the
 * first request. `@Idempotent(false)` (or `{ enabled: false }`) on a handler of an idempotent
 * controller leaves that handler out. `Idempotent.KEY` is the metadata key
 * (`reflector.get(Idempotent, handler)`).
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent({ required: true, ttl: 3_600_000 })
 * create(@Body() dto: CreatePaymentDto) {}
 * ```
 */
export const Idempotent = Object.assign(
  (options?: IdempotencyOptions | false) =>
    // A route left out needs no interceptor of its own; its controller's steps aside on it.
    options === false || options?.enabled === false
      ? IdempotentOptions(options)
      : applyDecorators(IdempotentOptions(options), UseInterceptors(IdempotencyInterceptor)),
  { KEY: IdempotentOptions.KEY },
) as unknown as typeof IdempotentOptions;
