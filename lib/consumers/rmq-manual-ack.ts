import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { IdempotencyOptions } from '../interfaces/idempotency-options.interface';

/** The parts of Nest's RmqContext (and amqplib's channel) used here. */
interface RmqContextLike {
  getChannelRef(): {
    ack(message: unknown): void;
    nack(message: unknown, allUpTo?: boolean, requeue?: boolean): void;
  };
  getMessage(): unknown;
}

const rmq = (context: ExecutionContext) => context.switchToRpc().getContext<RmqContextLike>();

/**
 * Settles RabbitMQ messages (`noAck: false`) that the handler does not run for, so none stays
 * unacked: a replay (done before) is acked; a refused message is nacked, requeued when a
 * redelivery may succeed (still in progress, store unavailable), else not (dead-lettered when the
 * queue has a dead-letter exchange, else dropped). Duplicates wait for the first delivery's
 * outcome rather than being requeued at once, over and over, while it runs. The handler still
 * acks (or nacks) the messages it runs.
 *
 * ```ts
 * @EventPattern('order.paid')
 * @Idempotent({ ...rmqManualAck, key: (ctx) => ctx.switchToRpc().getData().eventId })
 * ```
 */
export const rmqManualAck = {
  onConflict: 'wait',
  onReplay: (context: ExecutionContext): void => {
    const message = rmq(context);
    message.getChannelRef().ack(message.getMessage());
  },
  onReject: (context: ExecutionContext, error: IdempotencyError): void => {
    const message = rmq(context);
    message.getChannelRef().nack(message.getMessage(), false, error.retryable);
  },
} satisfies IdempotencyOptions;
