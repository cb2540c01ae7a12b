import { Inject } from '@nestjs/common';
import type { IdempotentMethodOptions } from '../interfaces/idempotency-run-options.interface';
import { checkMethodOptions } from '../options';
import { IdempotencyService } from '../services/idempotency.service';

/** The property the decorated class's IdempotencyService is injected into. */
const SERVICE = Symbol('IdempotencyService');

/**
 * Makes a method of a provider run once per key, through {@link IdempotencyService.run}: a call
 * whose key ran before returns the stored result without running the method. The scope
 * defaults to `Class.method`. The method must be async (return a promise). The class must be a
 * provider Nest creates (the service is injected into it); the key and fingerprint functions
 * run before anything else, and what they throw is thrown to the caller. Its options are checked
 * when the class is loaded: an unknown name, or one run() does not take, throws there.
 *
 * @example
 * ```ts
 * @Injectable()
 * class Invoices {
 *   @IdempotentMethod({ key: (orderId: string) => orderId })
 *   async send(orderId: string): Promise<string> {
 *     return `invoice for ${orderId}`;
 *   }
 * }
 * ```
 */
export function IdempotentMethod<A extends unknown[]>(options: IdempotentMethodOptions<A>) {
  return <M extends (...args: A) => Promise<unknown>>(
    target: object,
    name: string | symbol,
    descriptor: TypedPropertyDescriptor<M>,
  ): void => {
    const method = descriptor.value;
    if (typeof method !== 'function') {
      throw new TypeError('@IdempotentMethod() goes on a method, with a `key` function');
    }
    const { key, fingerprint, scope, ...rest } = checkMethodOptions(options);
    Inject(IdempotencyService)(target, SERVICE);
    const runScope = scope ?? `${target.constructor.name}.${String(name)}`;
    const wrapped = async function (this: { [SERVICE]?: IdempotencyService }, ...args: A) {
      const service = this[SERVICE];
      if (!service) {
        throw new Error(
          `@IdempotentMethod(): ${runScope} was called on an instance Nest did not create ` +
            '(no IdempotencyService was injected into it)',
        );
      }
      return service.run(key(...args), () => method.apply(this, args), {
        ...rest,
        scope: runScope,
        fingerprint: fingerprint?.(...args),
      });
    };
    descriptor.value = wrapped as M;
  };
}
