import { Controller, HttpException, Inject, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import {
  ClientProxy,
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  Payload,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib';
import {
  requireTransport,
  startConsumer,
  transportSetup,
  type Consumer,
  type TransportName,
} from '../support/microservice-app';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';
import { type RedisProcess, startRedisServer } from '../support/redis-server';
import { Executions, post } from '../support/test-app';

/**
 * `propagateKeys` through `ClientProxy.send` and `emit` on every transport: a message sent from a
 * propagating handler carries a derived key where `@Idempotent()` on the receiving service reads
 * it (NATS and RabbitMQ headers, the payload's `idempotencyKey` on TCP, Redis and MQTT), so a
 * re-run of the sending request is answered from the receiver's records instead of charging
 * again. Real brokers, two Nest apps in this process.
 */
const TRANSPORTS: TransportName[] = ['tcp', 'redis', 'nats', 'rmq', 'mqtt'];
const RUN = randomUUID().slice(0, 8);
const CHARGE = `propagated.charge.${RUN}`;
const PAID = `propagated.paid.${RUN}`;
const CLIENT = 'PAYMENTS_SERVICE';

let executions: Executions;

/** The receiving service. */
@Controller()
class ChargesConsumer {
  @MessagePattern(CHARGE)
  @Idempotent()
  charge(@Payload() data: { idempotencyKey?: string }) {
    executions.hit(data.idempotencyKey === undefined ? 'key in a header' : 'key in the payload');
    return { run: executions.hit('charge') };
  }

  @EventPattern(PAID)
  @Idempotent()
  paid() {
    executions.hit('paid');
  }
}

/** Whether the next run of /orders fails after it sent its messages. */
let failNext = false;

/** The sending service: an HTTP route that charges twice and announces it. */
@Controller()
class OrdersController {
  constructor(@Inject(CLIENT) private readonly client: ClientProxy) {}

  @Post('orders')
  @Idempotent({ propagateKeys: true })
  async order() {
    const first = await firstValueFrom(this.client.send(CHARGE, { amount: 100 }));
    const second = await firstValueFrom(this.client.send(CHARGE, { amount: 5 })); // its own key
    await firstValueFrom(this.client.emit(PAID, { amount: 105 }));
    if (failNext) {
      failNext = false;
      throw new HttpException('bad gateway', 502);
    }
    return [first, second];
  }

  @Post('plain')
  @Idempotent()
  async plain() {
    return firstValueFrom(this.client.send(CHARGE, { amount: 1 }));
  }
}

describe.each(TRANSPORTS)('propagateKeys through ClientProxy on %s', (name) => {
  const prefix = uniquePrefix(`propagated-${name}`);
  let transportRedis: RedisProcess | undefined;
  let consumer: Consumer;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    await requireTransport(name);
    if (name === 'redis') transportRedis = await startRedisServer();
    const setup = await transportSetup(name, transportRedis, `propagated-${RUN}-${name}`);
    executions = new Executions();
    consumer = await startConsumer(
      setup,
      { redis: testRedisUrl(), keyPrefix: `${prefix}consumer:` },
      { controllers: [ChargesConsumer], executions },
    );
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          redis: testRedisUrl(),
          keyPrefix: `${prefix}sender:`,
          scope: 'public',
          keyDerivationSecret: `propagated-keys-${RUN}-secret-0123456789abcdef`,
        }),
      ],
      controllers: [OrdersController],
      providers: [
        {
          provide: CLIENT,
          useFactory: () =>
            ClientProxyFactory.create({
              transport: setup.transport,
              options: setup.options,
            } as never),
        },
      ],
    })
    class SenderModule {}
    app = await NestFactory.create(SenderModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  }, 30_000);
  afterAll(async () => {
    await app?.get<ClientProxy>(CLIENT).close();
    await app?.close();
    await consumer?.close();
    await transportRedis?.stop();
    await cleanUpPrefix(prefix);
  });

  it('each message carries its own derived key; a re-run of the request is answered by the receiver without running again', async () => {
    const completed = executions.waitFor('completed', 3);
    failNext = true;
    const key = `order-${name}`;
    expect((await post(url, '/orders', { key })).status).toBe(502);
    await completed; // two charges and the event, each under a key of its own
    expect([executions.count('charge'), executions.count('paid')]).toEqual([2, 1]);
    expect(executions.ofType('bypassed')).toEqual([]);
    // Where the receiving @Idempotent() reads it: NATS and RabbitMQ headers, else the payload.
    const where = name === 'nats' || name === 'rmq' ? 'key in a header' : 'key in the payload';
    expect(executions.count(where)).toBe(2);

    const replayed = executions.waitFor('replayed', 3);
    const retry = await post(url, '/orders', { key });
    expect(retry.status).toBe(201);
    expect(retry.json()).toEqual([{ run: 1 }, { run: 2 }]); // the first run's answers
    await replayed;
    expect([executions.count('charge'), executions.count('paid')]).toEqual([2, 1]);
  });

  it('a route without propagateKeys sends no key', async () => {
    const bypassed = executions.waitFor('bypassed');
    const response = await post(url, '/plain', { key: `plain-${name}` });
    expect(response.status).toBe(201);
    await bypassed;
  });
});
