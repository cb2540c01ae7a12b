import { type Message, SendMessageCommand } from '@aws-sdk/client-sqs';
import { type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Consumer } from 'sqs-consumer';
import { IdempotencyModule, IdempotencyService, idempotentSqsHandler } from '../../lib';
import { until } from '../reliability/stream';
import { sqsClient, SqsEmulator } from '../support/sqs';

/**
 * `idempotentSqsHandler()` for apps that create their sqs-consumer consumers themselves, against
 * the SQS emulator (test/support/sqs.ts). A default `scope`, the same for every handler of the
 * app, would let two queues keyed by their business id (`key: 'id'`, ids that are per table
 * sequences) share records: a refund with the id of a payment already handled would be deleted
 * as a replay, and its work never run. So `scope` is required, and each handler's is its own.
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

/** Starts a consumer of `queueUrl` whose handler is `handle`; resolves deleted MessageIds into `deleted`. */
function consume(
  queueUrl: string,
  handle: (message: Message) => Promise<unknown>,
  deleted: string[],
) {
  const consumer = Consumer.create({
    queueUrl,
    sqs: sqsClient(sqs.endpoint),
    batchSize: 10,
    waitTimeSeconds: 1,
    handleMessageBatch: handle as never,
  });
  consumer.on('message_processed', (message) => void deleted.push(message.MessageId!));
  consumer.on('error', () => undefined);
  consumer.start();
  consumers.push(consumer);
}

async function send(queueUrl: string, body: object): Promise<string> {
  const { MessageId } = await sqs.client.send(
    new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(body) }),
  );
  return MessageId!;
}

describe('idempotentSqsHandler() on two queues of one app, each keyed by its own business id', () => {
  it("runs a refund whose id equals a payment's: the queues' records are apart", async () => {
    const payments = await sqs.createQueue('payments', { VisibilityTimeout: '2' });
    const refunds = await sqs.createQueue('refunds', { VisibilityTimeout: '2' });
    const charged: number[] = [];
    const refunded: number[] = [];
    const deleted: string[] = [];
    const id = (message: Message) => (JSON.parse(message.Body!) as { id: number }).id;
    consume(
      payments,
      idempotentSqsHandler(idempotency, async (m: Message) => void charged.push(id(m)), {
        key: 'id',
        scope: 'payments',
      }),
      deleted,
    );
    consume(
      refunds,
      idempotentSqsHandler(idempotency, async (m: Message) => void refunded.push(id(m)), {
        key: 'id',
        scope: 'refunds',
      }),
      deleted,
    );
    const payment = await send(payments, { id: 7, cents: 100 });
    await until(() => deleted.includes(payment), 10_000);
    const refund = await send(refunds, { id: 7, cents: 100 });
    await until(() => deleted.includes(refund), 10_000);
    expect(charged).toEqual([7]);
    expect(refunded).toEqual([7]);
  });

  it('refuses a handler without its scope, naming it, before any message', () => {
    const handle = async () => undefined;
    const options = { key: 'id' } as unknown as { key: string; scope: string };
    expect(() => idempotentSqsHandler(idempotency, handle, options)).toThrow(
      /idempotentSqsHandler: options.scope is required/,
    );
  });

  it('refuses a misspelt option, suggesting the one it takes', () => {
    const handle = async () => undefined;
    const options = { scope: 'payments', kye: 'id' } as unknown as { scope: string };
    expect(() => idempotentSqsHandler(idempotency, handle, options)).toThrow(
      /^idempotentSqsHandler: unknown option `kye` \(did you mean `key`\?\)$/,
    );
  });
});
