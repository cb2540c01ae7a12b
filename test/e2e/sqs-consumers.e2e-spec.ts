import { type Message, SendMessageBatchCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { SqsConsumerEventHandler, SqsMessageHandler, SqsModule } from '@ssut/nestjs-sqs';
import type { SqsConsumerOptions } from '@ssut/nestjs-sqs/dist/sqs.types';
import { Idempotent, IdempotencyModule, IdempotentSqsMessage } from '../../lib';
import { until } from '../reliability/stream';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { SqsEmulator } from '../support/sqs';

/**
 * `@IdempotentSqsMessage()` on `@ssut/nestjs-sqs` handlers (sqs-consumer 11), against an SQS
 * emulator on this machine (local-aws-sqs, see test/support/sqs.ts) and the Redis store: a
 * producer's retry, SQS's redelivery after the visibility timeout, a duplicate delivered while
 * the first still runs, a batch with one failing message, FIFO deduplication and group order.
 * Not on NestJS 12 (jest.nest12.config.cjs): @ssut/nestjs-sqs has no release for it. Crashes:
 * test/reliability/sqs-consumer-crashes.e2e-spec.ts.
 */

/** What the handlers did, per test. */
const state = {
  /** Every time the work started, by key, in order (a replay does not start it). */
  attempts: [] as string[],
  /** MessageIds sqs-consumer received (its `message_received` events), redeliveries included. */
  deliveries: [] as string[],
  /** The work that completed, by key, in order. */
  ran: [] as string[],
  /** Keys whose first attempt fails. */
  failOnce: new Set<string>(),
  /** While set, the work waits for it (after `started` is called). */
  gate: undefined as Promise<void> | undefined,
  started: () => undefined as void,
  /** MessageIds sqs-consumer deleted (its `message_processed` events). */
  deleted: [] as string[],
  /** Errors sqs-consumer emitted (`error` events). */
  consumerErrors: [] as string[],
};

/** sqs-consumer's events, recorded: deliveries, deletions, and errors (none expected). */
const delivered = (message: Message) => void state.deliveries.push(message.MessageId!);
const processed = (message: Message) => void state.deleted.push(message.MessageId!);
const failed = (error: Error) => void state.consumerErrors.push(error.message);

async function work(key: string): Promise<void> {
  state.attempts.push(key);
  if (state.failOnce.delete(key)) throw new Error(`transient failure of ${key}`);
  if (state.gate) {
    state.started();
    await state.gate;
  }
  state.ran.push(key);
}

const paymentId = (message: Message) =>
  (JSON.parse(message.Body!) as { paymentId: string }).paymentId;

@Injectable()
class Payments {
  @SqsMessageHandler('payments')
  @IdempotentSqsMessage({ key: 'paymentId', waitTimeout: 20_000, lockTtl: 5_000 })
  async charge(message: Message): Promise<void> {
    await work(paymentId(message));
  }

  @SqsConsumerEventHandler('payments', 'message_received')
  onReceived(message: Message): void {
    delivered(message);
  }

  @SqsConsumerEventHandler('payments', 'message_processed')
  onProcessed(message: Message): void {
    processed(message);
  }

  @SqsConsumerEventHandler('payments', 'error')
  onError(error: Error): void {
    failed(error);
  }
}

/** The key left out: each message is keyed by its MessageId (decorators in the other order). */
@Injectable()
class PaymentsByMessageId {
  @IdempotentSqsMessage()
  @SqsMessageHandler('by-message-id')
  async charge(message: Message): Promise<void> {
    await work(paymentId(message));
  }

  @SqsConsumerEventHandler('by-message-id', 'message_received')
  onReceived(message: Message): void {
    delivered(message);
  }

  @SqsConsumerEventHandler('by-message-id', 'message_processed')
  onProcessed(message: Message): void {
    processed(message);
  }

  @SqsConsumerEventHandler('by-message-id', 'error')
  onError(error: Error): void {
    failed(error);
  }
}

@Injectable()
class PaymentBatches {
  @SqsMessageHandler('batches', true)
  @IdempotentSqsMessage({ key: { attribute: 'Idempotency-Key' } })
  async charge(message: Message): Promise<void> {
    await work(message.MessageAttributes!['Idempotency-Key'].StringValue!);
  }

  @SqsConsumerEventHandler('batches', 'message_received')
  onReceived(message: Message): void {
    delivered(message);
  }

  @SqsConsumerEventHandler('batches', 'message_processed')
  onProcessed(message: Message): void {
    processed(message);
  }

  @SqsConsumerEventHandler('batches', 'error')
  onError(error: Error): void {
    failed(error);
  }
}

@Injectable()
class FifoPayments {
  @SqsMessageHandler('fifo', true)
  @IdempotentSqsMessage({ key: 'paymentId' })
  async charge(message: Message): Promise<void> {
    await work(paymentId(message));
  }

  @SqsConsumerEventHandler('fifo', 'message_received')
  onReceived(message: Message): void {
    delivered(message);
  }

  @SqsConsumerEventHandler('fifo', 'message_processed')
  onProcessed(message: Message): void {
    processed(message);
  }

  @SqsConsumerEventHandler('fifo', 'error')
  onError(error: Error): void {
    failed(error);
  }
}

/** `@Idempotent()`, the decorator a team already knows, on an SQS handler: no interceptor runs. */
@Injectable()
class InterceptedPayments {
  @SqsMessageHandler('payments')
  @Idempotent()
  async charge(message: Message): Promise<void> {
    await work(paymentId(message));
  }
}

const prefix = uniquePrefix('sqs-consumers');
/** Each test's records apart (its payments reuse the ids of the others'). */
let testPrefix = prefix;
let tests = 0;
let sqs: SqsEmulator;
const apps: INestApplicationContext[] = [];

/** A consumer app: the handlers above, the consumers given, the Redis store. */
async function startConsumers(...consumers: SqsConsumerOptions[]): Promise<void> {
  @Module({
    imports: [
      SqsModule.register({ consumers }),
      IdempotencyModule.forRoot({ redis: testRedisUrl(), keyPrefix: testPrefix }),
    ],
    providers: [Payments, PaymentsByMessageId, PaymentBatches, FifoPayments],
  })
  class ConsumerModule {}
  const app = await NestFactory.createApplicationContext(ConsumerModule, { logger: false });
  apps.push(app);
  await app.init();
}

/** sqs-consumer's options for a consumer of `queueUrl` polling the emulator. */
const consumer = (
  name: string,
  queueUrl: string,
  options: Partial<SqsConsumerOptions> = {},
): SqsConsumerOptions => ({
  name,
  queueUrl,
  sqs: sqs.client,
  // The emulator answers a receive once it holds batchSize messages or the wait is over.
  waitTimeSeconds: 1,
  ...options,
});

/** Sends a message: its MessageId. */
async function send(queueUrl: string, body: object, extra: object = {}): Promise<string> {
  const { MessageId } = await sqs.client.send(
    new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(body), ...extra }),
  );
  return MessageId!;
}

/**
 * Resolves once sqs-consumer deleted every message of `ids`, then checks that the queue holds
 * nothing more, visible or in flight: no delivery is left to run.
 */
async function deleted(queueUrl: string, ids: string[]): Promise<void> {
  await until(() => ids.every((id) => state.deleted.includes(id)), 20_000);
  expect(await sqs.messagesIn(queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  expect(state.consumerErrors).toEqual([]);
}

const times = (keys: string[], key: string) => keys.filter((k) => k === key).length;

beforeAll(async () => {
  sqs = await SqsEmulator.start();
});
afterAll(async () => {
  await sqs?.stop();
  const redis = inspectionClient();
  await deleteKeysUnder(redis, prefix);
  await redis.quit();
});
beforeEach(() => {
  testPrefix = `${prefix}${++tests}:`;
  Object.assign(state, {
    attempts: [],
    deliveries: [],
    ran: [],
    failOnce: new Set(),
    gate: undefined,
    deleted: [],
    consumerErrors: [],
  });
});
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

describe('@IdempotentSqsMessage() on an SQS consumer (sqs-consumer 11, emulator)', () => {
  // Visibility timeouts of 2 s, receives waiting 1 s: a message received at the start of a
  // receive cannot come back within the same one (the emulator would return it twice).
  it('runs a payment once when the producer retries its send (two MessageIds, one paymentId)', async () => {
    const queue = await sqs.createQueue('payments', { VisibilityTimeout: '2' });
    await startConsumers(consumer('payments', queue));
    const ids = [
      await send(queue, { paymentId: 'p1', cents: 100 }),
      await send(queue, { paymentId: 'p1', cents: 100 }), // the producer's retry
      await send(queue, { paymentId: 'p2', cents: 250 }),
    ];
    await deleted(queue, ids);
    // The retry was delivered and deleted as a replay: the work never started for it.
    expect(state.attempts.sort()).toEqual(['p1', 'p2']);
    expect(state.ran.sort()).toEqual(['p1', 'p2']);
  });

  it('keyed by MessageId (no `key`), a retried send runs twice: why the business id is the key', async () => {
    const queue = await sqs.createQueue('by-message-id', { VisibilityTimeout: '2' });
    await startConsumers(consumer('by-message-id', queue));
    const ids = [await send(queue, { paymentId: 'p1' }), await send(queue, { paymentId: 'p1' })];
    await deleted(queue, ids);
    expect(state.ran).toEqual(['p1', 'p1']);
  });

  it('leaves a failed message on the queue: redelivered after the visibility timeout, it runs once', async () => {
    const queue = await sqs.createQueue('payments', { VisibilityTimeout: '2' });
    await startConsumers(consumer('payments', queue));
    state.failOnce.add('p1');
    await deleted(queue, [await send(queue, { paymentId: 'p1' })]);
    expect(state.attempts).toEqual(['p1', 'p1']);
    expect(state.ran).toEqual(['p1']);
  });

  it('never deletes a redelivery while the first delivery runs; deletes it once that completed', async () => {
    // No heartbeat: the message comes back to the second consumer while the first one's
    // handler is held; the second one's run() waits for the first's outcome.
    const queue = await sqs.createQueue('payments', { VisibilityTimeout: '2' });
    await startConsumers(consumer('payments', queue));
    await startConsumers(consumer('payments', queue));
    let open!: () => void;
    state.gate = new Promise<void>((resolve) => (open = resolve));
    const started = new Promise<void>((resolve) => (state.started = resolve));
    const id = await send(queue, { paymentId: 'p1' });
    await started;
    // Redelivered after the visibility timeout: the second consumer's run() waits.
    await until(() => times(state.deliveries, id) === 2, 10_000);
    expect(state.deleted).toEqual([]);
    expect(state.ran).toEqual([]);
    open();
    await deleted(queue, [id]);
    expect(state.attempts).toEqual(['p1']);
    expect(state.ran).toEqual(['p1']);
  });

  it('a batch with one failing message: the others run once and are deleted, it comes back', async () => {
    const queue = await sqs.createQueue('batches', { VisibilityTimeout: '2' });
    await startConsumers(
      consumer('batches', queue, { batchSize: 10, messageAttributeNames: ['All'] }),
    );
    state.failOnce.add('k3');
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
    const { Successful = [] } = await sqs.client.send(
      new SendMessageBatchCommand({
        QueueUrl: queue,
        Entries: keys.map((key, index) => ({
          Id: String(index),
          MessageBody: JSON.stringify({ n: index }),
          MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: key } },
        })),
      }),
    );
    await deleted(
      queue,
      Successful.map((entry) => entry.MessageId!),
    );
    for (const key of ['k1', 'k2', 'k4', 'k5']) expect(times(state.attempts, key)).toBe(1);
    expect(times(state.attempts, 'k3')).toBe(2);
    expect(state.ran.sort()).toEqual(keys);
  });

  it('FIFO: MessageDeduplicationId drops a resend, the key a later retry; a group keeps its order', async () => {
    const queue = await sqs.createQueue('fifo', { FifoQueue: 'true', VisibilityTimeout: '2' });
    await startConsumers(
      consumer('fifo', queue, {
        batchSize: 10,
        attributeNames: ['All'], // MessageGroupId among them: a group's messages run in order
        suppressFifoWarning: true,
      }),
    );
    state.failOnce.add('p1');
    const fifo = (id: string, dedup: string) =>
      send(
        queue,
        { paymentId: id },
        { MessageGroupId: 'account-7', MessageDeduplicationId: dedup },
      );
    const ids = [
      await fifo('p1', 'p1'),
      await fifo('p1', 'p1'), // within SQS's deduplication interval: dropped by SQS
      await fifo('p2', 'p2'),
      await fifo('p1', 'p1-retry'), // a retry SQS cannot tell apart: the key does
    ];
    await deleted(queue, ids);
    // p1 failed first: p2 did not run before it did; the retry of p1 was a replay.
    expect(state.attempts).toEqual(['p1', 'p1', 'p2']);
    expect(state.ran).toEqual(['p1', 'p2']);
  });
});

describe('@Idempotent() on an @SqsMessageHandler', () => {
  it('is refused at boot, pointing at @IdempotentSqsMessage()', async () => {
    @Module({
      imports: [SqsModule.register({ consumers: [] }), IdempotencyModule.forRoot()],
      providers: [InterceptedPayments],
    })
    class ConsumerModule {}
    const booting = NestFactory.createApplicationContext(ConsumerModule, {
      logger: false,
      abortOnError: false,
    });
    await expect(booting).rejects.toThrow(
      /InterceptedPayments\.charge does nothing[\s\S]*for an @SqsMessageHandler, @IdempotentSqsMessage\(\)/,
    );
  });
});
