import { RabbitSubscribe } from '@golevelup/nestjs-rabbitmq';
import { Injectable, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions, Idempotent } from '../../lib';
import {
  deleteGolevelupQueues,
  EXCHANGE,
  type GolevelupApp,
  type Payment,
  QUEUES,
  startGolevelupApp,
} from '../support/golevelup-app';
import { cleanUpPrefix, STORES, storeOptions, uniquePrefix } from '../support/redis';
import { findFreePort } from '../support/redis-server';
import { until } from '../reliability/stream';

// @Idempotent() on @golevelup/nestjs-rabbitmq handlers (@RabbitSubscribe(), @RabbitRPC()) on the
// RabbitMQ of this machine, on the memory and Redis stores: messages published twice run once,
// each delivery is acked only once its outcome is stored, refusals are settled as what they are
// (a wait, a requeue, a dead letter), never as a handler's error; a stored error is handed to the
// queue's error behaviour once, and its duplicates are settled once.

const payment = (extra: Partial<Payment> = {}): Payment => ({
  id: randomUUID(),
  amount: 10,
  ...extra,
});

afterAll(deleteGolevelupQueues);

/** The settlements of the deliveries of `id`, as `ack` / `nack <requeue>`. */
const settled = (api: GolevelupApp, id: string) =>
  api.settlements
    .filter((s) => s.id === id)
    .map((s) => (s.kind === 'ack' ? 'ack' : `nack ${s.requeue}`));

describe.each(STORES)('golevelup RabbitMQ handlers on the %s store', (store) => {
  const prefix = uniquePrefix(`golevelup-${store}`);
  let api: GolevelupApp;
  beforeAll(async () => {
    api = await startGolevelupApp(storeOptions(store, prefix));
  });
  afterAll(async () => {
    await api?.close();
    await cleanUpPrefix(prefix);
  });

  it('runs a message published twice once, and acks both deliveries', async () => {
    const message = payment();
    const key = randomUUID();
    const replayed = api.executions.waitFor('replayed');
    await api.publish('charge', message, key);
    await api.publish('charge', message, key);
    await replayed;
    await until(() => settled(api, message.id).length === 2, 5_000);
    expect(api.executions.count(message.id)).toBe(1);
    expect(settled(api, message.id)).toEqual(['ack', 'ack']);
  });

  it("acks a duplicate only once the first delivery's outcome is stored", async () => {
    const message = payment({ hold: true });
    const key = randomUUID();
    await api.publish('charge', message, key);
    const release = await api.executions.nextStarted();
    const waiting = api.executions.waitFor('waiting');
    await api.publish('charge', message, key);
    await waiting; // a subscriber's duplicate waits for the outcome (onConflict: 'wait')
    expect(settled(api, message.id)).toEqual([]);
    const replayed = api.executions.waitFor('replayed');
    release();
    await replayed;
    await until(() => settled(api, message.id).length === 2, 5_000);
    const mine = api.log.filter((line) => line === `ack ${message.id}` || line.startsWith('event'));
    expect(mine.indexOf('event completed')).toBeLessThan(mine.indexOf(`ack ${message.id}`));
    expect(api.executions.count(message.id)).toBe(1);
  });

  it("reads the key from the payload's idempotencyKey without the header", async () => {
    const message = payment({ idempotencyKey: randomUUID() });
    const replayed = api.executions.waitFor('replayed');
    await api.publish('charge', message);
    await api.publish('charge', message);
    await replayed;
    expect(api.executions.count(message.id)).toBe(1);
  });

  it('requeues a duplicate refused as in progress, never dead-letters it (errorBehavior NACK)', async () => {
    const message = payment({ hold: true });
    const key = randomUUID();
    await api.publish('strict', message, key);
    const release = await api.executions.nextStarted();
    const conflict = api.executions.waitFor('conflict');
    await api.publish('strict', message, key);
    await conflict;
    release();
    // Requeued after the wait the refusal names; its redelivery replays the stored outcome.
    await until(() => settled(api, message.id).filter((s) => s === 'ack').length === 2, 10_000);
    expect(settled(api, message.id)).toContain('nack true');
    expect(settled(api, message.id)).not.toContain('nack false');
    expect((await api.amqp.channel.checkQueue(QUEUES.dead)).messageCount).toBe(0);
    expect(api.executions.count(message.id)).toBe(1);
  });

  it('dead-letters a key reused with another payload, without running it', async () => {
    const key = randomUUID();
    const first = payment();
    const completed = api.executions.waitFor('completed');
    await api.publish('strict', first, key);
    await completed;
    const other = payment({ amount: 99 });
    const { messageCount } = await api.amqp.channel.checkQueue(QUEUES.dead);
    await api.publish('strict', other, key);
    await until(() => settled(api, other.id).length === 1, 5_000);
    expect(settled(api, other.id)).toEqual(['nack false']);
    expect(api.executions.count(other.id)).toBe(0);
    await until(
      async () =>
        (await api.amqp.channel.checkQueue(QUEUES.dead)).messageCount === messageCount + 1,
      5_000,
    );
    await api.amqp.channel.purgeQueue(QUEUES.dead);
  });

  it('replays the stored reply of a @RabbitRPC to a duplicate request', async () => {
    const message = payment({ amount: 21 });
    const headers = { 'Idempotency-Key': randomUUID() };
    const request = () =>
      api.amqp.request({ exchange: EXCHANGE, routingKey: 'quote', payload: message, headers });
    const first = await request();
    expect(first).toEqual({ price: 42, run: 1 });
    expect(await request()).toEqual(first);
    expect(api.executions.count(message.id)).toBe(1);
  });

  it('answers a @RabbitRPC request reusing a key with the refusal', async () => {
    const headers = { 'Idempotency-Key': randomUUID() };
    const request = (message: Payment) =>
      api.amqp.request({ exchange: EXCHANGE, routingKey: 'quote', payload: message, headers });
    await request(payment());
    const other = payment({ amount: 5 });
    expect(await request(other)).toEqual({
      status: 'error',
      code: 'IDEMPOTENCY_KEY_REUSED',
      message: expect.any(String),
    });
    expect(api.executions.count(other.id)).toBe(0);
  });

  // A stored error went to golevelup's error behaviour with the delivery that threw it; a
  // duplicate (a redelivery, or the message published again) is settled once: a subscriber's is
  // acked, never requeued for ever (REQUEUE) nor dead-lettered again (NACK); an RPC's requester
  // gets the error answer the first one got.
  describe('with storeErrors', () => {
    /** More deliveries of one message than a settled outcome takes: it is looping. */
    const LOOPING = 6;

    /** Resolves once `id` has `count` acks, or as many deliveries as a loop makes. */
    const acked = (id: string, count: number) =>
      until(() => {
        const deliveries = settled(api, id);
        return (
          deliveries.filter((s) => s === 'ack').length >= count || deliveries.length >= LOOPING
        );
      }, 10_000);

    const deadLetters = async () => (await api.amqp.channel.checkQueue(QUEUES.dead)).messageCount;

    /** A @RabbitRPC request to `routingKey` with `message`, under `key`. */
    const request = (routingKey: string, message: Payment, key: string) =>
      api.amqp.request({
        exchange: EXCHANGE,
        routingKey,
        payload: message,
        headers: { 'Idempotency-Key': key },
        timeout: 5_000,
      });

    it('requeues the first delivery once (REQUEUE), then acks its redelivery and duplicates', async () => {
      const message = payment();
      const key = randomUUID();
      await api.publish('declined', message, key);
      await acked(message.id, 1);
      expect(settled(api, message.id)).toEqual(['nack true', 'ack']);
      await api.publish('declined', message, key);
      await acked(message.id, 2);
      expect(settled(api, message.id)).toEqual(['nack true', 'ack', 'ack']);
      expect(api.executions.count(message.id)).toBe(1);
    });

    it('dead-letters the first delivery (NACK), and acks a duplicate', async () => {
      const before = await deadLetters();
      const message = payment();
      const key = randomUUID();
      await api.publish('declinedDead', message, key);
      await until(async () => (await deadLetters()) === before + 1, 5_000);
      await api.publish('declinedDead', message, key);
      await until(() => settled(api, message.id).length === 2, 5_000);
      expect(settled(api, message.id)).toEqual(['nack false', 'ack']);
      expect(await deadLetters()).toBe(before + 1);
      expect(api.executions.count(message.id)).toBe(1);
      await api.amqp.channel.purgeQueue(QUEUES.dead);
    });

    it("answers a @RabbitRPC request requeued by golevelup's default with the stored error", async () => {
      const message = payment();
      const key = randomUUID();
      const reply = { status: 'error', message: 'declined #1' };
      expect(await request('declinedQuote', message, key)).toEqual(reply);
      await acked(message.id, 1);
      expect(settled(api, message.id)).toEqual(['nack true', 'ack']);
      // A new request goes to the error behaviour as the first did: requeued once, answered.
      expect(await request('declinedQuote', message, key)).toEqual(reply);
      await acked(message.id, 2);
      expect(settled(api, message.id)).toEqual(['nack true', 'ack', 'nack true', 'ack']);
      expect(api.executions.count(message.id)).toBe(1);
    });

    it("answers a @RabbitRPC duplicate through the app's error handler, as the first", async () => {
      const message = payment();
      const key = randomUUID();
      expect(await request('declinedReply', message, key)).toEqual({ declined: 'declined #1' });
      expect(await request('declinedReply', message, key)).toEqual({ declined: 'declined #1' });
      expect(settled(api, message.id)).toEqual(['ack', 'ack']);
      expect(api.executions.count(message.id)).toBe(1);
    });
  });

  it("names records after the handler's own method, not golevelup's bound copy", async () => {
    const message = payment();
    const completed = api.executions.waitFor('completed');
    await api.publish('charge', message, randomUUID());
    await completed;
    const event = api.executions.ofType('completed').at(-1)!;
    expect(event.handler).toBe('PaymentsHandlers.charge');
    expect(event.route).toMatch(/^PaymentsHandlers\.charge /);
  });
});

describe('golevelup RabbitMQ handlers during a store outage', () => {
  it('requeues each delivery, never acks it unprocessed nor dead-letters it', async () => {
    const deadPort = await findFreePort();
    const api = await startGolevelupApp({
      redis: `redis://127.0.0.1:${deadPort}`,
      storeTimeout: 200,
    });
    const message = payment();
    try {
      await api.publish('strict', message, randomUUID());
      // The refusal's wait (1 s) passes between deliveries: two take a little over a second.
      await until(() => settled(api, message.id).length >= 2, 10_000);
      expect(new Set(settled(api, message.id))).toEqual(new Set(['nack true']));
      expect(api.executions.count(message.id)).toBe(0);
      expect((await api.amqp.channel.checkQueue(QUEUES.dead)).messageCount).toBe(0);
    } finally {
      await api.close();
    }
  });
});

describe('@Idempotent() on golevelup handlers at boot', () => {
  async function boot(provider: Type, options: IdempotencyModuleOptions = {}): Promise<void> {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot(options)],
      providers: [provider],
    }).compile();
    try {
      await moduleRef.init();
    } finally {
      await moduleRef.close();
    }
  }

  it('refuses `transactional` without a store that writes in the transaction', async () => {
    @Injectable()
    class TransactionalHandlers {
      @RabbitSubscribe({ exchange: EXCHANGE, routingKey: 'tx', queue: 'unused' })
      @Idempotent({ transactional: true })
      pay() {}
    }
    await expect(boot(TransactionalHandlers)).rejects.toThrow(
      /`transactional` needs a store that writes in the app's transaction/,
    );
  });

  it('refuses a batch subscriber, which handles many messages in one call', async () => {
    @Injectable()
    class BatchHandlers {
      @RabbitSubscribe({ exchange: EXCHANGE, routingKey: 'batch', batchOptions: { size: 10 } })
      @Idempotent()
      payAll() {}
    }
    await expect(boot(BatchHandlers)).rejects.toThrow(
      'IdempotencyModule: BatchHandlers.payAll is a golevelup batch subscriber',
    );
  });
});
