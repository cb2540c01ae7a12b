import { Controller } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload, RmqContext } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { lastValueFrom } from 'rxjs';
import { Idempotent, rmqManualAck } from '../../lib';
import {
  requireTransport,
  RMQ_URL,
  startConsumer,
  transportSetup,
  withHeaders,
  withKey,
} from '../support/microservice-app';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';
import { RedisProcess, startRedisServer } from '../support/redis-server';
import { Executions } from '../support/test-app';

const RUN = randomUUID().slice(0, 8);
const P = {
  ledger: `ledger.entry.${RUN}`,
  ackEvent: `ack.event.${RUN}`,
  ackMessage: `ack.message.${RUN}`,
};

let executions: Executions;
type Entry = { eventId: string | number; failFirst?: boolean };

/**
 * Sends `entry` twice through `send`, the second while the first runs (it waits), and lets the
 * first finish; resolves once the second's `outcome` (its replay, or its own run) was reported.
 */
async function duplicateWhileFirstRuns(
  send: (entry: Entry) => void,
  entry: Entry,
  outcome: 'replayed' | 'completed',
): Promise<void> {
  const started = executions.nextStarted();
  send(entry);
  const release = await started;
  const waiting = executions.waitFor('waiting');
  send(entry);
  await waiting;
  const done = executions.waitFor(outcome);
  release();
  await done;
}

/** Holds its first run until the test releases it; fails it then when asked to. */
async function firstRunHeld(name: string, entry: Entry): Promise<number> {
  const run = executions.hit(name);
  if (run === 1) {
    await executions.hold();
    if (entry.failFirst) throw new Error('first attempt failed');
  }
  return run;
}

/** Events on transports that ack on delivery (TCP, Redis, NATS core, MQTT QoS 1). */
@Controller()
class LedgerConsumer {
  @EventPattern(P.ledger)
  @Idempotent({ key: (ctx) => ctx.switchToRpc().getData<Entry>().eventId })
  async record(@Payload() entry: Entry) {
    await firstRunHeld('ledger', entry);
  }
}

/** RabbitMQ with manual ack: the handler acks what it runs, rmqManualAck the rest. */
@Controller()
class AckingConsumer {
  @EventPattern(P.ackEvent)
  @Idempotent({ ...rmqManualAck, key: (ctx) => ctx.switchToRpc().getData<Entry>().eventId })
  async onEvent(@Payload() entry: Entry, @Ctx() context: RmqContext) {
    await settle(context, () => firstRunHeld('ack-event', entry));
  }

  @MessagePattern(P.ackMessage)
  @Idempotent({ ...rmqManualAck, required: true })
  async onMessage(@Payload() entry: Entry, @Ctx() context: RmqContext) {
    return { run: await settle(context, () => firstRunHeld('ack-message', entry)) };
  }
}

/** Acks after the work; nacks (no requeue: the claim is released, a duplicate retries) on error. */
async function settle<T>(context: RmqContext, work: () => Promise<T>): Promise<T> {
  try {
    const result = await work();
    context.getChannelRef().ack(context.getMessage());
    return result;
  } catch (error) {
    context.getChannelRef().nack(context.getMessage(), false, false);
    throw error;
  }
}

describe.each(['tcp', 'redis', 'nats', 'mqtt'] as const)(
  'a duplicate event while the first runs, on %s (acked on delivery)',
  (name) => {
    const prefix = uniquePrefix(`settle-${name}`);
    let transportRedis: RedisProcess | undefined;
    let consumer: Awaited<ReturnType<typeof startConsumer>>;
    let emit: (entry: Entry) => void;

    beforeAll(async () => {
      await requireTransport(name);
      if (name === 'redis') transportRedis = await startRedisServer();
      const setup = await transportSetup(name, transportRedis);
      executions = new Executions();
      consumer = await startConsumer(
        setup,
        { redis: testRedisUrl(), keyPrefix: prefix },
        { controllers: [LedgerConsumer], executions },
      );
      emit = (entry) =>
        consumer.client.emit(P.ledger, withKey(setup, entry, String(entry.eventId)));
    }, 30_000);
    afterAll(async () => {
      await consumer?.close();
      await transportRedis?.stop();
      await cleanUpPrefix(prefix);
    });

    it('is skipped once the first completed', async () => {
      executions.counts.clear();
      const eventId = randomUUID();
      await duplicateWhileFirstRuns(emit, { eventId }, 'replayed');
      expect(executions.count('ledger')).toBe(1);
    });

    it('runs once the first failed (before, it was refused as in progress and lost)', async () => {
      executions.counts.clear();
      const eventId = randomUUID();
      await duplicateWhileFirstRuns(emit, { eventId, failFirst: true }, 'completed');
      expect(executions.count('ledger')).toBe(2);
    });

    it('takes an integer key (an eventId column)', async () => {
      executions.counts.clear();
      const eventId = Date.now() * 1000 + Math.floor(Math.random() * 1000);
      const started = executions.nextStarted();
      emit({ eventId });
      (await started)();
      await executions.waitFor('completed');
      const replayed = executions.waitFor('replayed');
      emit({ eventId });
      await replayed;
      expect(executions.count('ledger')).toBe(1);
      expect(executions.ofType('rejected')).toHaveLength(0);
    });
  },
);

describe('RabbitMQ with manual ack and prefetch 20 (rmqManualAck)', () => {
  const prefix = uniquePrefix('settle-rmq');
  const queue = `idempotency-settle-${RUN}`;
  let consumer: Awaited<ReturnType<typeof startConsumer>>;
  let setup: Awaited<ReturnType<typeof transportSetup>>;

  beforeAll(async () => {
    await requireTransport('rmq');
    setup = await transportSetup('rmq', undefined, queue);
    executions = new Executions();
    consumer = await startConsumer(
      setup,
      { redis: testRedisUrl(), keyPrefix: prefix },
      {
        controllers: [AckingConsumer],
        executions,
        serverOptions: { noAck: false, prefetchCount: 20 },
      },
    );
  }, 30_000);
  afterAll(async () => {
    await consumer?.close();
    await cleanUpPrefix(prefix);
  });

  /** Messages left in the queue once the consumer's channel closed (unacked ones return to it). */
  async function leftInQueue(): Promise<number> {
    await consumer.close();
    const amqp = await import('amqplib');
    const connection = await amqp.connect(RMQ_URL);
    try {
      const channel = await connection.createChannel();
      const { messageCount } = await channel.checkQueue(queue);
      await channel.purgeQueue(queue);
      return messageCount;
    } finally {
      await connection.close();
      consumer = await startConsumer(
        setup,
        { redis: testRedisUrl(), keyPrefix: prefix },
        {
          controllers: [AckingConsumer],
          executions,
          serverOptions: { noAck: false, prefetchCount: 20 },
        },
      );
    }
  }

  const event = (entry: Entry) =>
    consumer.client.emit(P.ackEvent, withKey(setup, entry, String(entry.eventId)));

  it('settles a duplicate event that arrives while the first runs: ran once, nothing unacked', async () => {
    executions.counts.clear();
    const eventId = randomUUID();
    await duplicateWhileFirstRuns(event, { eventId }, 'replayed');
    expect(executions.count('ack-event')).toBe(1);
    expect(await leftInQueue()).toBe(0);
  });

  it('runs the duplicate when the first failed, and settles both', async () => {
    executions.counts.clear();
    const eventId = randomUUID();
    await duplicateWhileFirstRuns(event, { eventId, failFirst: true }, 'completed');
    expect(executions.count('ack-event')).toBe(2);
    expect(await leftInQueue()).toBe(0);
  });

  it('settles request/reply duplicates: both get the one result', async () => {
    executions.counts.clear();
    const key = randomUUID();
    const send = () =>
      lastValueFrom(
        consumer.client.send(
          P.ackMessage,
          withHeaders(setup, { eventId: key }, { 'Idempotency-Key': key }),
        ),
      );
    const started = executions.nextStarted();
    const first = send();
    const release = await started;
    const waiting = executions.waitFor('waiting');
    const second = send();
    await waiting;
    release();
    expect(await first).toEqual({ run: 1 });
    expect(await second).toEqual({ run: 1 });
    expect(await leftInQueue()).toBe(0);
  });

  it('nacks refused messages without requeue (no key with required): nothing ran or stays', async () => {
    executions.counts.clear();
    const rejected = executions.waitFor('rejected');
    const reply = lastValueFrom(consumer.client.send(P.ackMessage, withHeaders(setup, {}, {})));
    await expect(reply).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING' });
    await rejected;
    expect(executions.count('ack-message')).toBe(0);
    expect(await leftInQueue()).toBe(0);
  });
});
