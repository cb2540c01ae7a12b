import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, MessagePattern, ServerKafka } from '@nestjs/microservices';
import type { EachMessagePayload } from 'kafkajs';
import { Idempotent, IdempotencyModule, kafkaMessageKey } from '../../lib';

/**
 * `@Idempotent()` on Nest's own Kafka transport (ServerKafka, with kafkajs), without a broker (none
 * can run here): records are handed to `handleMessage()`, the function ServerKafka gives kafkajs
 * as `eachMessage`. kafkajs commits a record's offset (autoCommit, its default) once
 * `eachMessage` resolves; when it rejects, the offset is not committed and kafkajs delivers the
 * record again. So what `handleMessage()` does is what the consumer commits. The key comes from
 * the record's message key (`kafkaMessageKey`) or its `Idempotency-Key` header.
 */

/** ServerKafka that never connects: Nest registers the handlers, kafkajs is loaded, no broker. */
class OfflineKafka extends ServerKafka {
  replies: { topic: string; messages: { value: unknown; headers: Record<string, unknown> }[] }[] =
    [];

  override async listen(callback: () => void): Promise<void> {
    // What the reply of a @MessagePattern would be sent through (kafkajs's producer.send).
    this.producer = {
      send: async (record: OfflineKafka['replies'][number]) => void this.replies.push(record),
      disconnect: async () => undefined,
    } as unknown as ServerKafka['producer'];
    callback();
  }
}

const runs: string[] = [];
let release: (() => void) | undefined;

@Controller()
class PaymentsConsumer {
  @EventPattern('payments')
  @Idempotent({ key: kafkaMessageKey, required: true })
  async onPayment(event: { paymentId: string; fail?: boolean }): Promise<void> {
    if (event.fail) throw new Error('payment service down');
    runs.push(event.paymentId);
  }

  @EventPattern('orders')
  @Idempotent({ onConflict: 'reject' })
  async onOrder(event: { orderId: string }): Promise<void> {
    if (release) await new Promise<void>((resolve) => (release = resolve));
    runs.push(event.orderId);
  }

  @EventPattern('refunds')
  @Idempotent({ onConflict: 'wait' })
  async onRefund(event: { refundId: string }): Promise<void> {
    if (release) await new Promise<void>((resolve) => (release = resolve));
    runs.push(event.refundId);
  }

  @MessagePattern('charges')
  @Idempotent()
  charge(command: { cents: number }): { charged: number } {
    runs.push(`charge ${command.cents}`);
    return { charged: command.cents };
  }
}

@Module({ imports: [IdempotencyModule.forRoot()], controllers: [PaymentsConsumer] })
class ConsumerModule {}

let app: INestMicroservice;
let server: OfflineKafka;

/** What kafkajs hands `eachMessage`: the record as it came off the broker (Buffers). */
function record(
  topic: string,
  value: object,
  { key, headers = {} }: { key?: string; headers?: Record<string, string> } = {},
): EachMessagePayload {
  return {
    topic,
    partition: 0,
    message: {
      key: key === undefined ? null : Buffer.from(key),
      value: Buffer.from(JSON.stringify(value)),
      headers: Object.fromEntries(
        Object.entries(headers).map(([name, text]) => [name, Buffer.from(text)]),
      ),
      offset: '0',
      timestamp: '0',
      attributes: 0,
    },
    heartbeat: async () => undefined,
    pause: () => () => undefined,
  };
}

/** Whether kafkajs would commit the record: `eachMessage` resolved (true) or rejected (false). */
const commits = (payload: EachMessagePayload) =>
  server.handleMessage(payload).then(
    () => true,
    () => false,
  );

beforeAll(async () => {
  server = new OfflineKafka({});
  app = await NestFactory.createMicroservice(ConsumerModule, { strategy: server, logger: false });
  await app.listen();
});
afterAll(() => app?.close());
beforeEach(() => {
  runs.length = 0;
  release = undefined;
});

describe('@Idempotent() on a Kafka consumer (ServerKafka, no broker)', () => {
  it('keys a record by its message key: a redelivered record is committed without running again', async () => {
    const payment = record('payments', { paymentId: 'p1' }, { key: 'payment-p1' });
    expect(await commits(payment)).toBe(true);
    expect(await commits(record('payments', { paymentId: 'p1' }, { key: 'payment-p1' }))).toBe(
      true,
    );
    expect(runs).toEqual(['p1']);
  });

  it('keys a record by its Idempotency-Key header (a Buffer, any case)', async () => {
    const order = () =>
      record('orders', { orderId: 'o1' }, { headers: { 'idempotency-key': 'order-o1' } });
    expect(await commits(order())).toBe(true);
    expect(await commits(order())).toBe(true);
    expect(runs).toEqual(['o1']);
  });

  it('does not commit a record whose handler threw: redelivered, it runs (the key was released)', async () => {
    const key = { key: 'payment-p2' };
    expect(await commits(record('payments', { paymentId: 'p2', fail: true }, key))).toBe(false);
    expect(await commits(record('payments', { paymentId: 'p2' }, key))).toBe(true);
    expect(runs).toEqual(['p2']);
  });

  it('does not commit a record refused for want of its key (`required`)', async () => {
    expect(await commits(record('payments', { paymentId: 'p3' }))).toBe(false);
    expect(runs).toEqual([]);
  });

  it('does not commit a duplicate refused while the first runs (onConflict: reject)', async () => {
    release = () => undefined;
    const first = commits(
      record('orders', { orderId: 'o2' }, { headers: { 'Idempotency-Key': 'order-o2' } }),
    );
    const duplicate = record(
      'orders',
      { orderId: 'o2' },
      { headers: { 'Idempotency-Key': 'order-o2' } },
    );
    expect(await commits(duplicate)).toBe(false);
    release();
    expect(await first).toBe(true);
    expect(runs).toEqual(['o2']);
  });

  it('holds a waiting duplicate uncommitted until the first completes, then commits it', async () => {
    release = () => undefined;
    const refund = () =>
      record('refunds', { refundId: 'r1' }, { headers: { 'Idempotency-Key': 'refund-r1' } });
    const first = commits(refund());
    let settled = false;
    const duplicate = commits(refund()).then((committed) => {
      settled = true;
      return committed;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    release();
    expect(await first).toBe(true);
    expect(await duplicate).toBe(true);
    expect(runs).toEqual(['r1']);
  });

  it('request/reply: a duplicate is committed and answered with the stored reply', async () => {
    const charge = () =>
      record(
        'charges',
        { cents: 100 },
        {
          headers: {
            'Idempotency-Key': 'charge-1',
            kafka_correlationId: 'c1',
            kafka_replyTopic: 'charges.reply',
          },
        },
      );
    expect(await commits(charge())).toBe(true);
    expect(await commits(charge())).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(runs).toEqual(['charge 100']);
    const replies = server.replies.map((reply) => JSON.parse(String(reply.messages[0].value)));
    expect(replies).toEqual([{ charged: 100 }, { charged: 100 }]);
  });
});
