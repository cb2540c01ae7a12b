import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, ServerKafka } from '@nestjs/microservices';
import type { EachMessagePayload } from 'kafkajs';
import { Idempotent, IdempotencyModule, kafkaMessageKey } from '../../lib';

/**
 * `kafkaMessageKey` hands the record's message key to the route as text: a Buffer key as base64,
 * a JSON key as JSON, any other key as Nest decoded it (UTF-8). The route then takes only
 * printable ASCII of at most `maxKeyLength` characters, and refuses the rest as an invalid key,
 * which on Kafka rejects `eachMessage`: the offset is not committed and kafkajs delivers the
 * record again, and again, behind which its whole partition waits. An event id such as
 * `zahlung-müller-7`, or a JSON key longer than 255 characters, is a legitimate message key: it
 * must be handled once, not block its partition for ever. (ServerKafka without a broker, as in
 * kafka-consumers.spec.ts.)
 */
class OfflineKafka extends ServerKafka {
  override async listen(callback: () => void): Promise<void> {
    callback();
  }
}

const runs: string[] = [];

@Controller()
class PaymentsConsumer {
  @EventPattern('payments')
  @Idempotent({ key: kafkaMessageKey, required: true })
  onPayment(event: { paymentId: string }): void {
    runs.push(event.paymentId);
  }
}

@Module({ imports: [IdempotencyModule.forRoot()], controllers: [PaymentsConsumer] })
class ConsumerModule {}

let app: INestMicroservice;
let server: OfflineKafka;

function record(value: object, key: string): EachMessagePayload {
  return {
    topic: 'payments',
    partition: 0,
    message: {
      key: Buffer.from(key),
      value: Buffer.from(JSON.stringify(value)),
      headers: {},
      offset: '0',
      timestamp: '0',
      attributes: 0,
    },
    heartbeat: async () => undefined,
    pause: () => () => undefined,
  };
}

/** Whether kafkajs would commit the record (`eachMessage` resolved). */
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
beforeEach(() => void (runs.length = 0));

describe.each([
  ['a UTF-8 event id', 'zahlung-müller-7'],
  ['a JSON key of 300 characters', JSON.stringify({ eventId: 'e'.repeat(280) })],
])('kafkaMessageKey with %s', (_, key) => {
  it('handles the record once and commits it, and its redelivery without running it', async () => {
    expect(await commits(record({ paymentId: key.slice(0, 20) }, key))).toBe(true);
    expect(await commits(record({ paymentId: key.slice(0, 20) }, key))).toBe(true);
    expect(runs).toEqual([key.slice(0, 20)]);
  });
});
