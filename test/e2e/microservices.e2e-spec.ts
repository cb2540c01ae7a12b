import { lastValueFrom, toArray } from 'rxjs';
import {
  Consumer,
  MQTT_URL,
  NATS_URL,
  PATTERNS,
  requireBroker,
  requireTransport,
  RMQ_URL,
  startConsumer,
  TransportName,
  TransportSetup,
  transportSetup,
  withHeaders,
  withKey,
} from '../support/microservice-app';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';
import { findFreePort, RedisProcess, startRedisServer } from '../support/redis-server';
import { deferred, Executions } from '../support/test-app';

const TRANSPORTS: TransportName[] = ['tcp', 'redis', 'nats', 'rmq', 'mqtt'];

let seq = 0;
const newKey = () => `msg-${Date.now()}-${++seq}`;

/** What a client receives as an error: the RpcException's object, not "Internal server error". */
async function errorOf(promise: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Record<string, unknown>;
  }
  throw new Error('expected the call to fail');
}

describe.each(TRANSPORTS)('@Idempotent() on the %s transport', (name) => {
  const prefix = uniquePrefix(`rpc-${name}`);
  let transportRedis: RedisProcess | undefined;
  let setup: TransportSetup;
  let consumer: Consumer;

  beforeAll(async () => {
    await requireTransport(name);
    // The Redis transport gets a private server: its pub/sub channels are then ours alone.
    if (name === 'redis') transportRedis = await startRedisServer();
    setup = await transportSetup(name, transportRedis);
    consumer = await startConsumer(setup, { redis: testRedisUrl(), keyPrefix: prefix });
  }, 30_000);
  afterAll(async () => {
    await consumer?.close();
    await transportRedis?.stop();
    await cleanUpPrefix(prefix);
  });

  const send = <T>(pattern: string, data: Record<string, unknown>, key: string) =>
    lastValueFrom(consumer.client.send<T>(pattern, withKey(setup, data, key)));

  it('runs a redelivered message once and returns the same result', async () => {
    const key = newKey();
    const first = await send(PATTERNS.charge, { amount: 10 }, key);
    const again = await send(PATTERNS.charge, { amount: 10 }, key);
    expect(first).toEqual({ charged: 10, run: 1 });
    expect(again).toEqual(first);
    expect(consumer.executions.count('charge')).toBe(1);
    expect(consumer.executions.ofType('replayed')).toHaveLength(1);
  });

  it('replays every value of an Observable reply', async () => {
    const key = newKey();
    const values = (k: string) =>
      lastValueFrom(consumer.client.send(PATTERNS.stream, withKey(setup, {}, k)).pipe(toArray()));
    const first = await values(key);
    expect(first).toEqual([1, 'two', { three: 3 }]);
    expect(await values(key)).toEqual(first);
    expect(consumer.executions.count('stream')).toBe(1);
  });

  it('replays a reply of undefined as no value, as it was sent', async () => {
    const key = newKey();
    const values = () =>
      lastValueFrom(
        consumer.client.send(PATTERNS.nothing, withKey(setup, {}, key)).pipe(toArray()),
      );
    const first = await values();
    expect(await values()).toEqual(first);
    expect(consumer.executions.count('nothing')).toBe(1);
    const replayed = consumer.executions.ofType('replayed');
    expect(replayed.filter((event) => event.handler.endsWith('.nothing'))).toHaveLength(1);
  });

  it('passes on what a failing handler emitted before its error, and releases the claim', async () => {
    const key = newKey();
    const values: unknown[] = [];
    const error = await new Promise<unknown>((resolve, reject) =>
      consumer.client.send(PATTERNS.partial, withKey(setup, {}, key)).subscribe({
        next: (value) => values.push(value),
        error: resolve,
        complete: () => reject(new Error('expected the stream to fail')),
      }),
    );
    expect(values).toEqual([1, 2]);
    expect(error).toEqual({ status: 'error', message: 'stream broke' });
    const retry = consumer.client.send(PATTERNS.partial, withKey(setup, {}, key));
    expect(await lastValueFrom(retry.pipe(toArray()))).toEqual([1, 2, 3]);
    expect(consumer.executions.count('partial')).toBe(2);
  });

  it('runs 50 concurrent duplicates once; the others get IDEMPOTENCY_IN_PROGRESS with a retry hint', async () => {
    const key = newKey();
    const started = consumer.executions.nextStarted();
    const rejected = deferred();
    let rejections = 0;
    const calls = Array.from({ length: 50 }, () =>
      send(PATTERNS.slow, {}, key).catch((error: Record<string, unknown>) => {
        if (++rejections === 49) rejected.resolve();
        return error;
      }),
    );
    const release = await started;
    await rejected.promise;
    release();
    const results = await Promise.all(calls);
    expect(results.filter((r) => JSON.stringify(r) === '{"run":1}')).toHaveLength(1);
    const errors = results.filter((r) => (r as { code?: string }).code);
    expect(errors).toHaveLength(49);
    for (const error of errors) {
      expect(error).toMatchObject({
        status: 'error',
        code: 'IDEMPOTENCY_IN_PROGRESS',
        retryAfterMs: expect.any(Number),
        message: expect.stringContaining('still being processed'),
      });
    }
    expect(consumer.executions.count('slow')).toBe(1);
  });

  it('releases the claim on failure, so a retry runs the handler again', async () => {
    const key = newKey();
    expect(await errorOf(send(PATTERNS.fail, {}, key))).toEqual({
      status: 'error',
      message: 'card declined',
    });
    expect(await send(PATTERNS.fail, {}, key)).toEqual({ run: 2 });
    expect(consumer.executions.count('fail')).toBe(2);
  });

  it('replays a stored RpcException (storeErrors) as the same error, without running again', async () => {
    const key = newKey();
    const first = await errorOf(send(PATTERNS.declined, {}, key));
    expect(first).toEqual({ status: 'error', message: 'card declined', run: 1 });
    expect(await errorOf(send(PATTERNS.declined, {}, key))).toEqual(first);
    expect(consumer.executions.count('declined')).toBe(1);
    expect(consumer.executions.ofType('replayed')).not.toHaveLength(0);
  });

  it('answers IDEMPOTENCY_KEY_REUSED when the key comes back with another payload', async () => {
    const key = newKey();
    await send(PATTERNS.charge, { amount: 1 }, key);
    expect(await errorOf(send(PATTERNS.charge, { amount: 2 }, key))).toMatchObject({
      status: 'error',
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
  });

  it('rejects an invalid key with IDEMPOTENCY_KEY_INVALID and runs nothing', async () => {
    const before = consumer.executions.count('charge');
    expect(await errorOf(send(PATTERNS.charge, { amount: 1 }, 'x'.repeat(300)))).toMatchObject({
      code: 'IDEMPOTENCY_KEY_INVALID',
    });
    expect(consumer.executions.count('charge')).toBe(before);
  });

  it('skips a duplicate event without running its handler', async () => {
    const eventId = newKey();
    const completed = consumer.executions.waitFor('completed');
    consumer.client.emit(PATTERNS.paid, withKey(setup, { eventId }, eventId));
    await completed;
    const replayed = consumer.executions.waitFor('replayed');
    consumer.client.emit(PATTERNS.paid, withKey(setup, { eventId }, eventId));
    await replayed;
    expect(consumer.executions.count('paid')).toBe(1);
  });
});

const BROKERS = {
  nats: ['NATS', NATS_URL],
  rmq: ['RabbitMQ', RMQ_URL],
  mqtt: ['Mosquitto', MQTT_URL],
} as const;

describe.each(['nats', 'rmq', 'mqtt'] as const)('the key header on the %s transport', (name) => {
  const prefix = uniquePrefix(`rpc-header-${name}`);
  let setup: TransportSetup;
  let consumer: Consumer;

  beforeAll(async () => {
    const [broker, url] = BROKERS[name];
    await requireBroker(broker, '127.0.0.1', Number(new URL(url).port));
    setup = await transportSetup(name);
    consumer = await startConsumer(setup, { redis: testRedisUrl(), keyPrefix: prefix });
  }, 30_000);
  afterAll(async () => {
    await consumer?.close();
    await cleanUpPrefix(prefix);
  });

  const charge = (headers: Record<string, string>) =>
    lastValueFrom(
      consumer.client.send(PATTERNS.charge, withHeaders(setup, { amount: 3 }, headers)),
    );

  it('matches the header name in any case, as HTTP does', async () => {
    const key = newKey();
    const first = await charge({ 'idempotency-key': key });
    expect(await charge({ 'IDEMPOTENCY-KEY': key })).toEqual(first);
    expect(consumer.executions.count('charge')).toBe(1);
    expect(consumer.executions.ofType('replayed')).toHaveLength(1);
  });

  it('falls back to the payload when no header carries the key', async () => {
    const key = newKey();
    const send = () =>
      lastValueFrom(consumer.client.send(PATTERNS.charge, { amount: 4, idempotencyKey: key }));
    const before = consumer.executions.count('charge');
    const first = await send();
    expect(await send()).toEqual(first);
    expect(consumer.executions.count('charge')).toBe(before + 1);
  });

  it('takes a payload that is not an object (a string) with a key header', async () => {
    const key = newKey();
    const send = () =>
      lastValueFrom(
        consumer.client.send(
          PATTERNS.charge,
          withHeaders(setup, 'plain text' as never, { 'Idempotency-Key': key }),
        ),
      );
    const before = consumer.executions.count('charge');
    const first = await send();
    expect(await send()).toEqual(first);
    expect(consumer.executions.count('charge')).toBe(before + 1);
  });

  it('refuses a key sent twice under names that differ in case', async () => {
    const headers = { 'Idempotency-Key': newKey(), 'idempotency-key': newKey() };
    const before = consumer.executions.count('charge');
    expect(await errorOf(charge(headers))).toMatchObject({ code: 'IDEMPOTENCY_KEY_INVALID' });
    expect(consumer.executions.count('charge')).toBe(before);
  });
});

describe('RabbitMQ at-least-once with manual ack', () => {
  it('does not process a message again after the consumer crashed between handler and ack', async () => {
    await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
    const store = { redis: testRedisUrl(), keyPrefix: uniquePrefix('rmq-ack') };
    const queue = `idempotency-ack-${newKey()}`;
    const setup = await transportSetup('rmq', undefined, queue);
    const serverOptions = { noAck: false };
    const first = await startConsumer(setup, store, { shipping: true, serverOptions });
    const executions = first.executions;
    const eventId = newKey();
    const completed = executions.waitFor('completed');
    first.client.emit(PATTERNS.shipped, withKey(setup, { eventId }, eventId));
    await completed;
    // The process dies before acking: closing its connection makes RabbitMQ redeliver.
    const replayed = executions.waitFor('replayed');
    await first.close();
    const second = await startConsumer(setup, store, { shipping: true, serverOptions, executions });
    await replayed;
    await second.close();
    expect(executions.count('shipped')).toBe(1);

    // onReplay acked the redelivery: nothing went back to the queue when the second consumer left.
    const amqp = await import('amqplib');
    const connection = await amqp.connect(RMQ_URL);
    try {
      const channel = await connection.createChannel();
      expect((await channel.checkQueue(queue)).messageCount).toBe(0);
      await channel.deleteQueue(queue);
    } finally {
      await connection.close();
    }
  });
});

describe('microservice store outage', () => {
  it('fails closed with IDEMPOTENCY_STORE_UNAVAILABLE and runs nothing', async () => {
    const setup = await transportSetup('tcp');
    const deadPort = await findFreePort();
    const consumer = await startConsumer(setup, {
      redis: `redis://127.0.0.1:${deadPort}`,
      storeTimeout: 300,
    });
    try {
      const error = await errorOf(
        lastValueFrom(
          consumer.client.send(PATTERNS.charge, withKey(setup, { amount: 1 }, newKey())),
        ),
      );
      expect(error).toMatchObject({
        status: 'error',
        code: 'IDEMPOTENCY_STORE_UNAVAILABLE',
        retryAfterMs: 1000,
      });
      expect(consumer.executions.count('charge')).toBe(0);
    } finally {
      await consumer.close();
    }
  });
});

describe('hybrid app (HTTP + microservice)', () => {
  /**
   * Boots PaymentsConsumer in a hybrid app on Redis, the microservice started the way Nest
   * documents it (before the HTTP app's init), and returns a TCP client and a send() helper.
   */
  async function startHybrid(listen: boolean, inheritAppConfig = true) {
    const { Module } = await import('@nestjs/common');
    const { NestFactory } = await import('@nestjs/core');
    const { ClientProxyFactory, Transport } = await import('@nestjs/microservices');
    const { IdempotencyModule } = await import('../../lib');
    const { PaymentsConsumer, countExecutionsIn } = await import('../support/microservice-app');
    const executions = new Executions();
    countExecutionsIn(executions);
    const setup = await transportSetup('tcp');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ redis: testRedisUrl(), keyPrefix: uniquePrefix('hybrid') }),
      ],
      controllers: [PaymentsConsumer],
    })
    class HybridModule {}
    const app = await NestFactory.create(HybridModule, { logger: false });
    app.connectMicroservice(
      { transport: Transport.TCP, options: setup.options },
      { inheritAppConfig },
    );
    await app.startAllMicroservices();
    if (listen) await app.listen(0, '127.0.0.1');
    const client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: setup.options,
    } as never);
    return {
      executions,
      send: (data: Record<string, unknown>, key: string) =>
        lastValueFrom(client.send(PATTERNS.charge, withKey(setup, data, key))),
      close: async () => {
        await (client as { close(): Promise<void> | void }).close();
        await app.close();
      },
    };
  }

  it('serves messages that arrive before app.listen() (Nest runs the bootstrap hooks only then)', async () => {
    const hybrid = await startHybrid(false);
    try {
      const key = newKey();
      const first = await hybrid.send({ amount: 2 }, key);
      expect(first).toMatchObject({ charged: 2 });
      expect(await hybrid.send({ amount: 2 }, key)).toEqual(first);
      expect(hybrid.executions.count('charge')).toBe(1);
    } finally {
      await hybrid.close();
    }
  });

  it.each([true, false])(
    'applies @Idempotent() to a connected microservice (inheritAppConfig: %s)',
    async (inheritAppConfig) => {
      const hybrid = await startHybrid(true, inheritAppConfig);
      try {
        const key = newKey();
        const first = await hybrid.send({ amount: 3 }, key);
        expect(await hybrid.send({ amount: 3 }, key)).toEqual(first);
        expect(hybrid.executions.count('charge')).toBe(1);
        expect(await errorOf(hybrid.send({ amount: 4 }, key))).toMatchObject({
          code: 'IDEMPOTENCY_KEY_REUSED',
        });
      } finally {
        await hybrid.close();
      }
    },
  );
});
