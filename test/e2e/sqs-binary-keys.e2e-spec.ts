import { type Message, SendMessageCommand } from '@aws-sdk/client-sqs';
import { type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Consumer } from 'sqs-consumer';
import { IdempotencyModule, IdempotencyService, idempotentSqsHandler } from '../../lib';
import { until } from '../reliability/stream';
import { sqsClient, SqsEmulator } from '../support/sqs';

/**
 * A key from a Binary message attribute (a 16-byte UUID a producer sends as bytes), against the
 * SQS emulator (test/support/sqs.ts): the key is the bytes (base64), so two payments whose ids
 * are not valid UTF-8 each run. Read as UTF-8, both ids became the same replacement characters,
 * and the second payment's message was deleted as a replay without its work running. A String
 * attribute's key is its text, as before: the producer's retry is still a replay.
 */
let sqs: SqsEmulator;
let app: INestApplicationContext;
let idempotency: IdempotencyService;
const consumers: Consumer[] = [];

beforeAll(async () => {
  sqs = await SqsEmulator.start();
  @Module({ imports: [IdempotencyModule.forRoot()] })
  class AppModule {}
  app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  idempotency = app.get(IdempotencyService);
});
afterAll(async () => {
  for (const consumer of consumers) consumer.stop({ abort: true });
  await app?.close();
  await sqs?.stop();
});

/** Consumes `queueUrl` through an idempotent handler keyed by the attribute `id`. */
function consume(queueUrl: string, scope: string, charged: string[], deleted: string[]): void {
  const consumer = Consumer.create({
    queueUrl,
    sqs: sqsClient(sqs.endpoint),
    batchSize: 10,
    waitTimeSeconds: 1,
    messageAttributeNames: ['id'],
    handleMessageBatch: idempotentSqsHandler(
      idempotency,
      async (message: Message) => void charged.push(message.Body!),
      { key: { attribute: 'id' }, scope },
    ) as never,
  });
  consumer.on('message_processed', (message) => void deleted.push(message.MessageId!));
  consumer.on('error', () => undefined);
  consumer.start();
  consumers.push(consumer);
}

async function send(
  queueUrl: string,
  body: string,
  id: { DataType: string; StringValue?: string; BinaryValue?: Uint8Array },
): Promise<string> {
  const { MessageId } = await sqs.client.send(
    new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body, MessageAttributes: { id } }),
  );
  return MessageId!;
}

describe('idempotentSqsHandler() keyed by a message attribute', () => {
  it('runs two payments whose Binary ids are not valid UTF-8, and replays a resend of one', async () => {
    const queue = await sqs.createQueue('binary-keys', { VisibilityTimeout: '2' });
    const charged: string[] = [];
    const deleted: string[] = [];
    consume(queue, 'binary-payments', charged, deleted);
    const first = Uint8Array.from({ length: 16 }, (_, i) => 0x80 + i);
    const second = Uint8Array.from({ length: 16 }, (_, i) => 0xc0 + i);
    const ids = [
      await send(queue, 'payment 1', { DataType: 'Binary', BinaryValue: first }),
      await send(queue, 'payment 2', { DataType: 'Binary', BinaryValue: second }),
    ];
    await until(() => ids.every((id) => deleted.includes(id)), 10_000);
    const retry = await send(queue, 'payment 1 (retry)', {
      DataType: 'Binary',
      BinaryValue: first,
    });
    await until(() => deleted.includes(retry), 10_000);
    expect(charged.sort()).toEqual(['payment 1', 'payment 2']);
    expect(await sqs.messagesIn(queue)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('keys a String attribute by its text, as before: a resend is a replay', async () => {
    const queue = await sqs.createQueue('string-keys', { VisibilityTimeout: '2' });
    const charged: string[] = [];
    const deleted: string[] = [];
    consume(queue, 'string-payments', charged, deleted);
    const first = await send(queue, 'payment 1', { DataType: 'String', StringValue: 'pay-1' });
    await until(() => deleted.includes(first), 10_000);
    const retry = await send(queue, 'payment 1 (retry)', {
      DataType: 'String',
      StringValue: 'pay-1',
    });
    await until(() => deleted.includes(retry), 10_000);
    expect(charged).toEqual(['payment 1']);
    // The record of the first delivery is under the attribute's text.
    await expect(
      idempotency.run('pay-1', () => 'ran again', { scope: 'string-payments' }),
    ).resolves.toBeUndefined();
  });
});
