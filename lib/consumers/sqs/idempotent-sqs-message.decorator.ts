import { Inject } from '@nestjs/common';
import { IdempotencyService } from '../../services/idempotency.service';
import { type IdempotentSqsOptions, SqsMessageRunner } from './sqs-handler';
import type { SqsMessage } from './sqs-message';

/** The property the decorated class's IdempotencyService is injected into. */
const SERVICE = Symbol('IdempotencyService');

/**
 * Makes an `@SqsMessageHandler()` method of `@ssut/nestjs-sqs` (on `sqs-consumer`) handle each
 * message once per key, through `IdempotencyService.run()`: a duplicate (a redelivery after the
 * visibility timeout, a producer's retry) is deleted without running the method, once the first
 * delivery's outcome is stored; a duplicate of one still running waits for it. Write the method
 * for one message, also for a batch handler (`@SqsMessageHandler(name, true)`): the batch is run
 * message by message, and only the messages that completed are deleted. The method's result is
 * not kept (nor returned to sqs-consumer, which would then not delete the message). The scope
 * defaults to `Class.method`. The class must be a provider Nest creates (the service is injected
 * into it). Options are checked when the class is loaded. See docs/consumers.md.
 *
 * @example
 * ```ts
 * @SqsMessageHandler('payments')
 * @IdempotentSqsMessage({ key: 'paymentId' })
 * async charge(message: Message): Promise<void> {
 *   await this.payments.charge(JSON.parse(message.Body!));
 * }
 * ```
 */
export function IdempotentSqsMessage(options: IdempotentSqsOptions = {}) {
  return <T extends SqsMessage, R>(
    target: object,
    name: string | symbol,
    descriptor: TypedPropertyDescriptor<(message: T) => Promise<R>>,
  ): void => {
    const method = descriptor.value;
    if (typeof method !== 'function') {
      throw new TypeError('@IdempotentSqsMessage() goes on a method that handles an SQS message');
    }
    const runner = new SqsMessageRunner<SqsMessage>(
      options,
      '@IdempotentSqsMessage()',
      `${target.constructor.name}.${String(name)}`,
    );
    const { scope } = runner;
    Inject(IdempotencyService)(target, SERVICE);
    const wrapped = function (
      this: { [SERVICE]?: IdempotencyService },
      input: SqsMessage | SqsMessage[],
    ) {
      const service = this[SERVICE];
      if (!service) {
        return Promise.reject(
          new Error(
            `@IdempotentSqsMessage(): ${scope} was called on an instance Nest did not create ` +
              '(no IdempotencyService was injected into it)',
          ),
        );
      }
      return runner.handle(service, input, (message) => method.call(this, message as T));
    };
    // @SqsMessageHandler() is found by its metadata on the function: written below this
    // decorator, it put it on the method replaced here.
    for (const key of Reflect.getOwnMetadataKeys(method)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, method), wrapped);
    }
    Object.defineProperty(wrapped, 'name', { value: method.name });
    descriptor.value = wrapped as unknown as (message: T) => Promise<R>;
  };
}
