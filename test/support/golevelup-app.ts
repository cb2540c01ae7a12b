import {
  AmqpConnection,
  MessageHandlerErrorBehavior,
  RabbitMQModule,
  RabbitRPC,
  RabbitSubscribe,
} from '@golevelup/nestjs-rabbitmq';
import { type INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { type Channel, connect, type ConsumeMessage, type Message } from 'amqplib';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions, Idempotent } from '../../lib';
import { requireBroker, RMQ_URL } from './microservice-app';
import { Executions } from './test-app';

/** Names unique to this run, so runs sharing the broker never receive each other's messages. */
const RUN = randomUUID().slice(0, 8);
export const EXCHANGE = `idempotency.golevelup.${RUN}`;
export const QUEUES = {
  charge: `idempotency-golevelup-charge-${RUN}`,
  strict: `idempotency-golevelup-strict-${RUN}`,
  quote: `idempotency-golevelup-quote-${RUN}`,
  /** Where `strict` and `declinedDead` dead-letter what they nack without requeue. */
  dead: `idempotency-golevelup-dead-${RUN}`,
  declined: `idempotency-golevelup-declined-${RUN}`,
  declinedDead: `idempotency-golevelup-declined-dead-${RUN}`,
  declinedQuote: `idempotency-golevelup-declined-quote-${RUN}`,
  declinedReply: `idempotency-golevelup-declined-reply-${RUN}`,
};

/** A handler's error that `storeErrors` stores (the route option of the `declined*` handlers). */
export class PaymentDeclined extends Error {}

/**
 * An RPC error handler as golevelup's README suggests: it answers the requester with the error
 * and acks the request.
 */
function replyWithError(channel: Channel, message: ConsumeMessage, error: unknown): void {
  const { replyTo, correlationId } = message.properties;
  const body = { declined: (error as Error).message };
  channel.sendToQueue(replyTo, Buffer.from(JSON.stringify(body)), { correlationId });
  channel.ack(message);
}

/** A payment message: `id` names it in the test's counts; the key may ride in the payload. */
export interface Payment {
  id: string;
  amount: number;
  idempotencyKey?: string;
  /** Hold the first run until the test lets go. */
  hold?: boolean;
}

/** Counts a run of `payment`, and holds the first one when it asks to. */
async function ran(executions: Executions, name: string, payment: Payment): Promise<number> {
  executions.hit(name);
  const run = executions.hit(payment.id);
  if (payment.hold && run === 1) await executions.hold();
  return run;
}

@Injectable()
export class PaymentsHandlers {
  constructor(private readonly executions: Executions) {}

  @RabbitSubscribe({
    exchange: EXCHANGE,
    routingKey: 'charge',
    queue: QUEUES.charge,
    queueOptions: { durable: false },
  })
  @Idempotent()
  async charge(payment: Payment): Promise<void> {
    await ran(this.executions, 'charge', payment);
  }

  /** Errors dead-letter here (NACK); duplicates are refused, not waited for. */
  @RabbitSubscribe({
    exchange: EXCHANGE,
    routingKey: 'strict',
    queue: QUEUES.strict,
    errorBehavior: MessageHandlerErrorBehavior.NACK,
    queueOptions: { durable: false, deadLetterExchange: '', deadLetterRoutingKey: QUEUES.dead },
  })
  @Idempotent({ onConflict: 'reject' })
  async strict(payment: Payment): Promise<void> {
    await ran(this.executions, 'strict', payment);
  }

  @RabbitRPC({
    exchange: EXCHANGE,
    routingKey: 'quote',
    queue: QUEUES.quote,
    queueOptions: { durable: false },
  })
  @Idempotent()
  async quote(payment: Payment): Promise<{ price: number; run: number }> {
    return { price: payment.amount * 2, run: await ran(this.executions, 'quote', payment) };
  }

  /** Declines every payment; the error is stored and goes to golevelup's REQUEUE. */
  @RabbitSubscribe({
    exchange: EXCHANGE,
    routingKey: 'declined',
    queue: QUEUES.declined,
    errorBehavior: MessageHandlerErrorBehavior.REQUEUE,
    queueOptions: { durable: false },
  })
  @Idempotent({ storeErrors: [PaymentDeclined] })
  async declined(payment: Payment): Promise<void> {
    throw new PaymentDeclined(`declined #${await ran(this.executions, 'declined', payment)}`);
  }

  /** Declines every payment; the error is stored and dead-lettered (NACK). */
  @RabbitSubscribe({
    exchange: EXCHANGE,
    routingKey: 'declinedDead',
    queue: QUEUES.declinedDead,
    errorBehavior: MessageHandlerErrorBehavior.NACK,
    queueOptions: { durable: false, deadLetterExchange: '', deadLetterRoutingKey: QUEUES.dead },
  })
  @Idempotent({ storeErrors: [PaymentDeclined] })
  async declinedDead(payment: Payment): Promise<void> {
    throw new PaymentDeclined(`declined #${await ran(this.executions, 'declinedDead', payment)}`);
  }

  /** An RPC that declines, under golevelup's default RPC error handling (REQUEUE). */
  @RabbitRPC({
    exchange: EXCHANGE,
    routingKey: 'declinedQuote',
    queue: QUEUES.declinedQuote,
    queueOptions: { durable: false },
  })
  @Idempotent({ storeErrors: [PaymentDeclined] })
  async declinedQuote(payment: Payment): Promise<never> {
    throw new PaymentDeclined(`declined #${await ran(this.executions, 'declinedQuote', payment)}`);
  }

  /** An RPC that declines, its error answered by an error handler of the app's. */
  @RabbitRPC({
    exchange: EXCHANGE,
    routingKey: 'declinedReply',
    queue: QUEUES.declinedReply,
    errorHandler: replyWithError,
    queueOptions: { durable: false },
  })
  @Idempotent({ storeErrors: [PaymentDeclined] })
  async declinedReply(payment: Payment): Promise<never> {
    throw new PaymentDeclined(`declined #${await ran(this.executions, 'declinedReply', payment)}`);
  }
}

/** How a delivery was settled, as the channel was told: in order, with the message's key. */
export interface Settlement {
  kind: 'ack' | 'nack';
  requeue?: boolean;
  /** The routing key it was published with (the handler it went to). */
  routingKey: string;
  /** The message's payload `id`. */
  id: string;
}

/** What a test reads: the app, its counts and events, the settlements of its deliveries. */
export interface GolevelupApp {
  app: INestApplicationContext;
  amqp: AmqpConnection;
  executions: Executions;
  /** Settlements and events in the order they happened: `ack <id>`, `event <type>`. */
  log: string[];
  settlements: Settlement[];
  /** Publishes `payment` to `routingKey`, its key in the Idempotency-Key header when given. */
  publish(routingKey: string, payment: Payment, key?: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Boots {@link PaymentsHandlers} on RabbitMQ through golevelup, with `options`. Every ack and
 * nack of the app's channel is recorded (the channel's own methods, called through), so a test
 * sees how each delivery was settled and when.
 */
export async function startGolevelupApp(options: IdempotencyModuleOptions): Promise<GolevelupApp> {
  await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
  const executions = new Executions();
  const log: string[] = [];
  const settlements: Settlement[] = [];
  @Module({
    imports: [
      RabbitMQModule.forRoot({
        uri: RMQ_URL,
        exchanges: [{ name: EXCHANGE, type: 'topic', options: { autoDelete: true } }],
        queues: [{ name: QUEUES.dead, options: { durable: false } }],
        connectionInitOptions: { wait: true, timeout: 5_000 },
      }),
      IdempotencyModule.forRoot({
        ...options,
        onEvent: (event) => {
          log.push(`event ${event.type}`);
          executions.record(event);
        },
      }),
    ],
    providers: [PaymentsHandlers, { provide: Executions, useValue: executions }],
  })
  class GolevelupModule {}
  const app = await NestFactory.createApplicationContext(GolevelupModule, { logger: false });
  await app.init();
  const amqp = app.get(AmqpConnection);
  // The handlers' deliveries are settled on the connection's default channel.
  const channel = amqp.channel;
  const note = (kind: 'ack' | 'nack', message: Message, requeue?: boolean) => {
    const id = (JSON.parse(message.content.toString()) as Payment).id;
    const { routingKey } = message.fields;
    settlements.push({ kind, routingKey, id, ...(kind === 'nack' && { requeue }) });
    log.push(`${kind} ${id}`);
  };
  const { ack, nack } = channel;
  channel.ack = (message, allUpTo) => {
    note('ack', message);
    ack.call(channel, message, allUpTo);
  };
  channel.nack = (message, allUpTo, requeue) => {
    note('nack', message, requeue);
    nack.call(channel, message, allUpTo, requeue);
  };
  return {
    app,
    amqp,
    executions,
    log,
    settlements,
    async publish(routingKey, payment, key) {
      await amqp.publish(EXCHANGE, routingKey, payment, {
        headers: key === undefined ? {} : { 'Idempotency-Key': key },
      });
    },
    close: () => app.close(),
  };
}

/** Deletes this run's queues from the broker (an `afterAll` step: they outlive the apps). */
export async function deleteGolevelupQueues(): Promise<void> {
  const connection = await connect(RMQ_URL);
  try {
    const channel = await connection.createChannel();
    for (const queue of Object.values(QUEUES)) await channel.deleteQueue(queue);
  } finally {
    await connection.close();
  }
}
