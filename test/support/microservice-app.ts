import { Controller, INestMicroservice, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxy,
  ClientProxyFactory,
  Ctx,
  EventPattern,
  MessagePattern,
  MqttRecordBuilder,
  NatsRecordBuilder,
  Payload,
  RmqContext,
  RmqRecordBuilder,
  RpcException,
  Transport,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { createConnection } from 'node:net';
import { headers as natsHeaders } from 'nats';
import { concat, of, throwError } from 'rxjs';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions } from '../../lib';
import { findFreePort } from './redis-server';
import { Executions } from './test-app';

/** A suffix per test run, so runs sharing a broker never receive each other's messages. */
const RUN = randomUUID().slice(0, 8);
export const PATTERNS = {
  charge: `payments.charge.${RUN}`,
  slow: `payments.slow.${RUN}`,
  wait: `payments.wait.${RUN}`,
  fail: `payments.fail.${RUN}`,
  declined: `payments.declined.${RUN}`,
  stream: `payments.stream.${RUN}`,
  partial: `payments.partial.${RUN}`,
  nothing: `payments.nothing.${RUN}`,
  paid: `order.paid.${RUN}`,
  shipped: `order.shipped.${RUN}`,
};
export const RMQ_URL = 'amqp://guest:guest@127.0.0.1:5672';
export const NATS_URL = 'nats://127.0.0.1:4222';
export const MQTT_URL = 'mqtt://127.0.0.1:1883';

/** Acknowledges a RabbitMQ message the handler did not run for (manual-ack queues). */
export function ackRmq(context: { switchToRpc(): { getContext(): unknown } }): void {
  const rmq = context.switchToRpc().getContext() as RmqContext;
  rmq.getChannelRef().ack(rmq.getMessage());
}

let executions: Executions;

/** Where the consumers below count their executions (the side channel the tests read). */
export function countExecutionsIn(target: Executions): void {
  executions = target;
}

@Controller()
export class PaymentsConsumer {
  @MessagePattern(PATTERNS.charge)
  @Idempotent()
  charge(@Payload() command: { amount: number }) {
    return { charged: command.amount, run: executions.hit('charge') };
  }

  @MessagePattern(PATTERNS.slow)
  @Idempotent()
  async slow() {
    const run = executions.hit('slow');
    if (run === 1) await executions.hold();
    return { run };
  }

  @MessagePattern(PATTERNS.wait)
  @Idempotent({ onConflict: 'wait' })
  async wait() {
    const run = executions.hit('wait');
    if (run === 1) await executions.hold();
    return { run };
  }

  @MessagePattern(PATTERNS.fail)
  @Idempotent()
  fail() {
    const run = executions.hit('fail');
    if (run === 1) throw new RpcException({ status: 'error', message: 'card declined' });
    return { run };
  }

  @MessagePattern(PATTERNS.declined)
  @Idempotent({ storeErrors: [RpcException] })
  declined() {
    const run = executions.hit('declined');
    throw new RpcException({ status: 'error', message: 'card declined', run });
  }

  @MessagePattern(PATTERNS.stream)
  @Idempotent()
  stream() {
    const run = executions.hit('stream');
    return of(run, 'two', { three: 3 });
  }

  @MessagePattern(PATTERNS.nothing)
  @Idempotent()
  nothing(): undefined {
    executions.hit('nothing');
    return undefined;
  }

  @MessagePattern(PATTERNS.partial)
  @Idempotent()
  partial() {
    const run = executions.hit('partial');
    const failure = new RpcException({ status: 'error', message: 'stream broke' });
    return run === 1
      ? concat(
          of(1, 2),
          throwError(() => failure),
        )
      : of(1, 2, 3);
  }

  @EventPattern(PATTERNS.paid)
  @Idempotent({ key: (ctx) => ctx.switchToRpc().getData().eventId })
  onPaid() {
    executions.hit('paid');
  }
}

/** The at-least-once consumer: manual ack, and the first delivery "crashes" before its ack. */
@Controller()
class ShippingConsumer {
  @EventPattern(PATTERNS.shipped)
  @Idempotent({ key: (ctx) => ctx.switchToRpc().getData().eventId, onReplay: ackRmq })
  onShipped(@Ctx() context: RmqContext) {
    if (executions.hit('shipped') > 1) context.getChannelRef().ack(context.getMessage());
    // First delivery: the handler did its work but the process dies before acking.
  }
}

export type TransportName = 'tcp' | 'redis' | 'nats' | 'rmq' | 'mqtt';

export interface TransportSetup {
  name: TransportName;
  /** Server and client options (the transport's `options`). */
  options: Record<string, unknown>;
  transport: Transport;
}

/** Connection options for one transport; TCP gets a free port, Redis the given server. */
export async function transportSetup(
  name: TransportName,
  redis?: { host: string; port: number },
  queue = `idempotency-test-${RUN}`,
): Promise<TransportSetup> {
  switch (name) {
    case 'tcp':
      return {
        name,
        transport: Transport.TCP,
        options: { host: '127.0.0.1', port: await findFreePort() },
      };
    case 'redis':
      return { name, transport: Transport.REDIS, options: { ...redis } };
    case 'nats':
      return { name, transport: Transport.NATS, options: { servers: [NATS_URL] } };
    case 'rmq':
      return {
        name,
        transport: Transport.RMQ,
        options: { urls: [RMQ_URL], queue, queueOptions: { durable: false } },
      };
    case 'mqtt':
      // MQTT 5: user properties carry the key header.
      return { name, transport: Transport.MQTT, options: { url: MQTT_URL, protocolVersion: 5 } };
  }
}

/** Fails with a message naming the broker when it does not answer (never a silent skip). */
export async function requireBroker(name: string, host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const socket = createConnection({ host, port, timeout: 2_000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    const fail = () => {
      socket.destroy();
      reject(
        new Error(
          `${name} is not reachable at ${host}:${port}; these tests need a running ${name} broker.`,
        ),
      );
    };
    socket.once('timeout', fail);
    socket.once('error', fail);
  });
}

/** The broker behind each transport that needs one: its name in messages, and its URL. */
const BROKERS: Partial<Record<TransportName, [string, string]>> = {
  nats: ['NATS', NATS_URL],
  rmq: ['RabbitMQ', RMQ_URL],
  mqtt: ['Mosquitto', MQTT_URL],
};

/** Fails naming the broker when `name`'s does not answer (TCP and Redis need none running). */
export async function requireTransport(name: TransportName): Promise<void> {
  const broker = BROKERS[name];
  if (broker) await requireBroker(broker[0], '127.0.0.1', Number(new URL(broker[1]).port));
}

export interface Consumer {
  app: INestMicroservice;
  client: ClientProxy;
  executions: Executions;
  close(): Promise<void>;
}

/** Boots the consumers as a Nest microservice on a real transport, with a client to talk to it. */
export async function startConsumer(
  setup: TransportSetup,
  options: IdempotencyModuleOptions,
  extra: {
    shipping?: boolean;
    /** Controllers to serve instead of the payments (or shipping) consumer. */
    controllers?: Type[];
    executions?: Executions;
    serverOptions?: Record<string, unknown>;
  } = {},
): Promise<Consumer> {
  executions = extra.executions ?? new Executions();
  const own = executions;
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        ...options,
        onEvent: (event) => own.record(event),
      }),
    ],
    controllers: extra.controllers ?? (extra.shipping ? [ShippingConsumer] : [PaymentsConsumer]),
  })
  class ConsumerModule {}
  const app = await NestFactory.createMicroservice(ConsumerModule, {
    transport: setup.transport,
    options: { ...setup.options, ...extra.serverOptions },
    logger: false,
  } as never);
  await app.listen();
  const client = ClientProxyFactory.create({
    transport: setup.transport,
    options: setup.options,
  } as never) as unknown as ClientProxy;
  await client.connect();
  return {
    app,
    client,
    executions: own,
    close: async () => {
      await client.close();
      await app.close();
    },
  };
}

/** The message to send with an idempotency key, placed where each transport carries it. */
export function withKey(
  setup: TransportSetup,
  data: Record<string, unknown>,
  key: string,
): unknown {
  if (setup.name === 'nats' || setup.name === 'rmq' || setup.name === 'mqtt') {
    return withHeaders(setup, data, { 'Idempotency-Key': key });
  }
  return { ...data, idempotencyKey: key };
}

/** A NATS, RabbitMQ or MQTT 5 (user properties, QoS 1) message with these headers. */
export function withHeaders(
  setup: TransportSetup,
  data: Record<string, unknown>,
  headers: Record<string, string>,
): unknown {
  if (setup.name === 'rmq') return new RmqRecordBuilder(data).setOptions({ headers }).build();
  if (setup.name === 'mqtt') {
    return new MqttRecordBuilder(data).setQoS(1).setProperties({ userProperties: headers }).build();
  }
  const nats = natsHeaders();
  for (const [name, value] of Object.entries(headers)) nats.set(name, value);
  return new NatsRecordBuilder(data).setHeaders(nats).build();
}
