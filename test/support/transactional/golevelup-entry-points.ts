import {
  AmqpConnection,
  MessageHandlerErrorBehavior,
  Nack,
  RabbitMQModule,
  RabbitSubscribe,
} from '@golevelup/nestjs-rabbitmq';
import { TransactionHost } from '@nestjs-cls/transactional';
import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  Module,
  type NestInterceptor,
} from '@nestjs/common';
import { APP_INTERCEPTOR, NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { type Observable, tap } from 'rxjs';
import { Idempotent } from '../../../lib';
import { requireBroker, RMQ_URL } from '../microservice-app';
import { type Answer, DECLINED, type EntryPoint, Ledger } from './harness';

const RUN = randomUUID().slice(0, 8);
const EXCHANGE = `idempotency.tx.golevelup.${RUN}`;
const QUEUE = `idempotency-tx-golevelup-${RUN}`;

/** The header that names a published message's caller: a subscriber has no reply. */
const CALL = 'x-call';

/** Callers waiting for the handling of the message they published to end, by {@link CALL}. */
const waiting = new Map<string, (answer: Answer) => void>();

/**
 * Global, so outside `@Idempotent()`: tells a message's caller how its delivery's handling
 * ended, replays and refusals included: handled, the handler's error, or nacked (requeued).
 */
@Injectable()
class HandlingEnded implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const message = context.getArgByIndex<{ properties: { headers?: Record<string, string> } }>(1);
    const end = (answer: Answer) => waiting.get(message.properties.headers?.[CALL] ?? '')?.(answer);
    return next.handle().pipe(
      tap({
        next: (value) =>
          value instanceof Nack
            ? end({ ok: false, value, text: `nacked, requeue ${value.requeue}` })
            : end({ ok: true, value, text: 'handled' }),
        error: (error: Error) => end({ ok: false, value: error, text: error.message }),
      }),
    );
  }
}

@Injectable()
class PaymentsRabbitHandlers {
  constructor(
    private readonly ledger: Ledger,
    private readonly txHost: TransactionHost,
  ) {}

  /** A failed delivery is acked (dropped): the caller publishes again, as a retry. */
  @RabbitSubscribe({
    exchange: EXCHANGE,
    routingKey: 'paid',
    queue: QUEUE,
    queueOptions: { durable: false, autoDelete: true },
    errorBehavior: MessageHandlerErrorBehavior.ACK,
  })
  @Idempotent({ transactional: true })
  async paid(event: { item: string }): Promise<void> {
    await this.ledger.pay(this.txHost.tx, event.item);
  }
}

/**
 * A `@RabbitSubscribe()` handler of @golevelup/nestjs-rabbitmq: how its delivery's handling ended
 * is the answer. A fenced run is rolled back and requeued (its redelivery replays the outcome of
 * the call that took its key over).
 */
export const golevelupSubscriber: EntryPoint = {
  name: 'golevelup @RabbitSubscribe handler',
  declined: DECLINED,
  fenced: 'nacked, requeue true',
  async start(imports, ledger) {
    await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
    @Module({
      imports: [
        ...imports(false),
        RabbitMQModule.forRoot({
          uri: RMQ_URL,
          exchanges: [{ name: EXCHANGE, type: 'topic', options: { autoDelete: true } }],
          connectionInitOptions: { wait: true, timeout: 5_000 },
        }),
      ],
      providers: [
        PaymentsRabbitHandlers,
        { provide: Ledger, useValue: ledger },
        { provide: APP_INTERCEPTOR, useClass: HandlingEnded },
      ],
    })
    class GolevelupModule {}
    const app = await NestFactory.createApplicationContext(GolevelupModule, { logger: false });
    await app.init();
    const amqp = app.get(AmqpConnection);
    return {
      app,
      async call(key, item) {
        const id = randomUUID();
        const ended = new Promise<Answer>((resolve) => waiting.set(id, resolve));
        await amqp.publish(
          EXCHANGE,
          'paid',
          { item },
          { headers: { 'Idempotency-Key': key, [CALL]: id } },
        );
        try {
          return await ended;
        } finally {
          waiting.delete(id);
        }
      },
      async close() {
        await app.close();
      },
    };
  },
};
