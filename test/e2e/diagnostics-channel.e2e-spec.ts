import { randomUUID } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  DIAGNOSTICS_CHANNEL_PREFIX,
  IdempotencyEvent,
  IdempotencyEventType,
  IdempotencyModule,
} from '../../lib';
import { cleanUpPrefix, STORES, testRedisUrl, uniquePrefix } from '../support/redis';
import { PLATFORMS, post, startTestApp, TestApp } from '../support/test-app';

/**
 * Every event is published on `node:diagnostics_channel`, one channel per type
 * (`nestjs-idempotency:<type>`), so an APM agent sees outcomes without code in the app: here
 * with no `onEvent` listener at all.
 */
describe.each(PLATFORMS)('diagnostics_channel events on %s', (platform) => {
  describe.each(STORES)('with the %s store', (storeName) => {
    const prefix = uniquePrefix(`diagnostics-${platform}`);
    const received: { channel: string; event: IdempotencyEvent }[] = [];
    const types: IdempotencyEventType[] = ['claimed', 'completed', 'replayed', 'key_reused'];
    const listeners = types.map((type) => {
      const name = `${DIAGNOSTICS_CHANNEL_PREFIX}${type}`;
      const listener = (message: unknown) =>
        received.push({ channel: name, event: message as IdempotencyEvent });
      return { name, listener };
    });
    let test: TestApp;

    beforeAll(async () => {
      for (const { name, listener } of listeners) subscribe(name, listener);
      const store = storeName === 'redis' ? { redis: testRedisUrl() } : {};
      test = await startTestApp(platform, { ...store, keyPrefix: prefix });
    });

    afterAll(async () => {
      for (const { name, listener } of listeners) unsubscribe(name, listener);
      await test?.close();
      if (storeName === 'redis') await cleanUpPrefix(prefix);
    });

    it('publishes each outcome on the channel named for its type', async () => {
      received.length = 0;
      const key = randomUUID();
      await post(test.url, '/payments', { key, body: { amount: 1 } });
      await post(test.url, '/payments', { key, body: { amount: 1 } });
      await post(test.url, '/payments', { key, body: { amount: 2 } });

      expect(received.map(({ channel }) => channel)).toEqual([
        'nestjs-idempotency:claimed',
        'nestjs-idempotency:completed',
        'nestjs-idempotency:replayed',
        'nestjs-idempotency:key_reused',
      ]);
      for (const { channel, event } of received) {
        expect(channel).toBe(`nestjs-idempotency:${event.type}`);
        expect(event).toMatchObject({
          handler: 'PaymentsController.create',
          route: 'POST /payments',
        });
        expect(event.key).toMatch(new RegExp(`^${prefix}`));
        expect(event.key).not.toContain(key);
      }
      // The same events onEvent got.
      expect(test.executions.events.map(({ type }) => type)).toEqual(
        received.map(({ event }) => event.type),
      );
    });
  });

  it('publishes with no onEvent listener in the app', async () => {
    const claimed: unknown[] = [];
    const listener = (message: unknown) => claimed.push(message);
    subscribe('nestjs-idempotency:claimed', listener);
    const app = await startTestApp(platform, () => IdempotencyModule.forRoot({}));
    try {
      await post(app.url, '/payments', { key: randomUUID(), body: { amount: 1 } });
      expect(claimed).toEqual([expect.objectContaining({ type: 'claimed' })]);
    } finally {
      unsubscribe('nestjs-idempotency:claimed', listener);
      await app.close();
    }
  });
});
