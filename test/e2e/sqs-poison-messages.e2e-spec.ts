import { type Message, SendMessageCommand } from '@aws-sdk/client-sqs';
import { type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Consumer } from 'sqs-consumer';
import { IdempotencyModule, IdempotencyService, idempotentSqsHandler } from '../../lib';
import { until } from '../reliability/stream';
import { sqsClient, SqsEmulator } from '../support/sqs';

/**
 * Messages a producer got wrong, in a batch with good ones, keyed by `key: 'paymentId'` (SQS
 * emulator, test/support/sqs.ts): a body that is not JSON has no key there and runs keyed by its
 * MessageId (with a warning); a key that is an object, an empty string or a boolean can never be
 * a key, so the message is never deleted (it goes to the dead-letter queue after
 * `maxReceiveCount`) and never stops the good ones of its batch, which run once and are deleted.
 */
let sqs: SqsEmulator;
let app: INestApplicationContext;
let consumer: Consumer | undefined;

beforeAll(async () => {
  sqs = await SqsEmulator.start();
  @Module({ imports: [IdempotencyModule.forRoot()] })
  class AppModule {}
  app = await NestFactory.createApplicationContext(AppModule, { logger: false });
});
afterAll(async () => {
  consumer?.stop({ abort: true });
  await app?.close();
  await sqs?.stop();
});

describe('idempotentSqsHandler() with poison messages in a batch', () => {
  it('runs and deletes the good ones once, and the unkeyed body by MessageId; never deletes a message whose key cannot be one', async () => {
    const queue = await sqs.createQueue('poison', { VisibilityTimeout: '2' });
    const ran: string[] = [];
    const deleted: string[] = [];
    const received: string[] = [];
    consumer = Consumer.create({
      queueUrl: queue,
      sqs: sqsClient(sqs.endpoint),
      batchSize: 10,
      waitTimeSeconds: 1,
      handleMessageBatch: idempotentSqsHandler(
        app.get(IdempotencyService),
        async (message: Message) => void ran.push(message.Body!),
        { key: 'paymentId', scope: 'poison' },
      ) as never,
    });
    consumer.on('message_received', (message) => void received.push(message.MessageId!));
    consumer.on('message_processed', (message) => void deleted.push(message.MessageId!));
    consumer.on('error', () => undefined);
    const bodies = [
      '{"paymentId":"p1"}',
      'not json at all',
      '{"paymentId":{"id":1}}',
      '{"paymentId":""}',
      '{"paymentId":true}',
      '{"paymentId":"p2"}',
    ];
    const ids: string[] = [];
    for (const body of bodies) {
      const { MessageId } = await sqs.client.send(
        new SendMessageCommand({ QueueUrl: queue, MessageBody: body }),
      );
      ids.push(MessageId!);
    }
    consumer.start();
    const [good1, notJson, objectKey, emptyKey, booleanKey, good2] = ids;
    await until(() => [good1, notJson, good2].every((id) => deleted.includes(id)), 10_000);
    // The poison messages come back after their visibility timeout, undeleted.
    const poison = [objectKey, emptyKey, booleanKey];
    const times = (id: string) => received.filter((r) => r === id).length;
    await until(() => poison.every((id) => times(id) >= 2), 10_000);
    consumer.stop({ abort: true });
    expect(ran.sort()).toEqual(['not json at all', '{"paymentId":"p1"}', '{"paymentId":"p2"}']);
    expect(deleted.filter((id) => poison.includes(id))).toEqual([]);
    expect([good1, notJson, good2].map(times)).toEqual([1, 1, 1]);
  });
});
