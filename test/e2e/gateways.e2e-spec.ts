import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Ack, MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib';
import {
  GATEWAY_PLATFORMS,
  type GatewayApp,
  type GatewayPlatform,
  startGatewayApp,
} from '../support/gateway-app';
import { cleanUpPrefix, STORES, storeOptions, uniquePrefix } from '../support/redis';
import { findFreePort } from '../support/redis-server';

// @Idempotent() on @SubscribeMessage() handlers of WebSocket gateways: a real Nest app on
// @nestjs/platform-socket.io and on @nestjs/platform-ws, real socket.io and ws clients, on the
// memory and Redis stores. The key travels in the message's `idempotencyKey` field.

const SECRET = 'gateway-test-secret-0123456789abcdef';
const newKey = () => `ws-${randomUUID()}`;

/** What a client reads of a refusal: socket.io's ack, ws's `exception` message. */
function refusal(platform: GatewayPlatform, code: string, extra: Record<string, unknown> = {}) {
  const body = { status: 'error', code, message: expect.any(String), ...extra };
  return platform === 'ws' ? { event: 'exception', data: body } : body;
}

describe.each(GATEWAY_PLATFORMS)('gateways on %s', (platform) => {
  describe.each(STORES)('on the %s store', (store) => {
    const prefix = uniquePrefix(`gateways-${platform}-${store}`);
    let api: GatewayApp;
    beforeAll(async () => {
      api = await startGatewayApp(platform, {
        ...storeOptions(store, prefix),
        keyDerivationSecret: SECRET,
      });
    });
    afterAll(async () => {
      await api?.close();
      await cleanUpPrefix(prefix);
    });

    it('runs the first message and answers a duplicate with the same ack', async () => {
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 10 };
      const first = await client.request('charge', message);
      const second = await client.request('charge', message);
      expect(first).toEqual({ charged: 10, run: expect.any(Number), user: null });
      expect(second).toEqual(first);
      expect(api.executions.count('charge')).toBe((first as { run: number }).run);
    });

    it('replays a message to emit (a value with an event field) as the first one', async () => {
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 7 };
      const before = api.executions.count('notify');
      const first = client.next('charged');
      client.send('notify', message);
      const firstData = await first;
      const replayed = client.next('charged');
      client.send('notify', message);
      expect(await replayed).toEqual(firstData);
      expect(firstData).toEqual({ amount: 7, run: before + 1 });
      expect(api.executions.count('notify')).toBe(before + 1);
    });

    it("replays without running the handler's own interceptors, whatever their order", async () => {
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 2 };
      const before = api.executions.count('stamping');
      const first = await client.request('stamped', message);
      expect(first).toEqual({ charged: 2, run: expect.any(Number), stamped: true });
      expect(await client.request('stamped', message)).toEqual(first);
      expect(api.executions.count('stamping')).toBe(before + 1);
    });

    it('refuses another payload under the key with IDEMPOTENCY_KEY_REUSED', async () => {
      const client = await api.connect();
      const idempotencyKey = newKey();
      await client.request('charge', { idempotencyKey, amount: 1 });
      const before = api.executions.count('charge');
      const answer = await client.request('charge', { idempotencyKey, amount: 2 });
      expect(answer).toEqual(refusal(platform, 'IDEMPOTENCY_KEY_REUSED'));
      expect(api.executions.count('charge')).toBe(before);
    });

    it('refuses a duplicate while the first runs with IDEMPOTENCY_IN_PROGRESS', async () => {
      // Two connections: a ws client tells answers apart by their order only.
      const holder = await api.connect();
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 3 };
      const first = holder.request('slow', message);
      const release = await api.executions.nextStarted();
      const duplicate = await client.request('slow', message);
      release();
      expect(duplicate).toEqual(
        refusal(platform, 'IDEMPOTENCY_IN_PROGRESS', { retryAfterMs: expect.any(Number) }),
      );
      expect(await first).toEqual({ charged: 3, run: 1 });
      expect(api.executions.count('slow')).toBe(1);
    });

    it("waits for the first run's ack under onConflict: 'wait'", async () => {
      const waiting = await api.connect();
      const holder = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 4 };
      const first = holder.request('slowWait', message);
      const release = await api.executions.nextStarted();
      const waited = api.executions.waitFor('waiting');
      const duplicate = waiting.request('slowWait', message);
      await waited;
      release();
      expect(await duplicate).toEqual(await first);
      expect(api.executions.count('slowWait')).toBe(1);
    });

    it('releases the key when the handler fails, so a retry runs', async () => {
      // The failure reaches its own connection (socket.io's `exception` event; on ws, Nest 12
      // sends it, Nest 11 nothing): the retry comes on another.
      const failing = await api.connect();
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 5 };
      const released = api.executions.waitFor('released');
      failing.send('fail', message);
      await released;
      expect(await client.request('fail', message)).toEqual({ charged: 5, run: 2 });
      expect(await client.request('fail', message)).toEqual({ charged: 5, run: 2 });
    });

    it("scopes records to the socket's user (client.data.user)", async () => {
      const alice = await api.connect('alice');
      const bob = await api.connect('bob');
      const aliceAgain = await api.connect('alice');
      const message = { idempotencyKey: newKey(), amount: 6 };
      const mine = await alice.request('charge', message);
      const theirs = await bob.request('charge', message);
      expect(mine).toMatchObject({ user: 'alice' });
      expect(theirs).toMatchObject({ user: 'bob' });
      expect(theirs).not.toEqual(mine);
      expect(await aliceAgain.request('charge', message)).toEqual(mine);
    });

    it('warns once for a handler whose socket has no user and no scope', async () => {
      const warn = jest.spyOn(Logger.prototype, 'warn');
      try {
        const client = await api.connect();
        await client.request('byOrder', { orderId: newKey(), amount: 1 });
        await client.request('byOrder', { orderId: newKey(), amount: 1 });
        const unscoped = warn.mock.calls.filter(([message]) =>
          String(message).includes('PaymentsGateway.byOrder: no principal'),
        );
        expect(unscoped).toHaveLength(1);
      } finally {
        warn.mockRestore();
      }
    });

    it('reads the key through a key function', async () => {
      const client = await api.connect();
      const orderId = newKey();
      const first = await client.request('byOrder', { orderId, amount: 1 });
      expect(await client.request('byOrder', { orderId, amount: 1 })).toEqual(first);
      const other = await client.request('byOrder', { orderId: newKey(), amount: 1 });
      expect(other).not.toEqual(first);
    });

    it('runs without a claim when the message has no key', async () => {
      const client = await api.connect();
      const first = (await client.request('charge', { amount: 1 })) as { run: number };
      const second = (await client.request('charge', { amount: 1 })) as { run: number };
      expect(second.run).toBe(first.run + 1);
    });

    it('derives the same downstream key on a replay, another for another key', async () => {
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 1 };
      const first = (await client.request('derive', message)) as { key: string };
      expect(await client.request('derive', message)).toEqual(first);
      const other = (await client.request('derive', { ...message, idempotencyKey: newKey() })) as {
        key: string;
      };
      expect(first.key).toMatch(/^[\w-]{43}$/);
      expect(other.key).not.toBe(first.key);
    });

    it('resumes a resumable handler after its last recorded step', async () => {
      const failing = await api.connect();
      const client = await api.connect();
      const message = { idempotencyKey: newKey(), amount: 1, item: 'book' };
      const released = api.executions.waitFor('released');
      failing.send('order', message);
      await released;
      const answer = await client.request('order', message);
      expect(answer).toEqual({ reserved: { item: 'book', run: 1 }, paid: 'paid-1' });
      expect(api.executions.count('order.reserve')).toBe(1);
      expect(api.executions.count('order.pay')).toBe(2);
      expect(await client.request('order', message)).toEqual(answer);
    });
  });

  it('answers a store outage with IDEMPOTENCY_STORE_UNAVAILABLE and runs nothing', async () => {
    const deadPort = await findFreePort();
    const api = await startGatewayApp(platform, {
      redis: `redis://127.0.0.1:${deadPort}`,
      storeTimeout: 300,
    });
    try {
      const client = await api.connect();
      const answer = await client.request('charge', { idempotencyKey: newKey(), amount: 1 });
      expect(answer).toEqual(
        refusal(platform, 'IDEMPOTENCY_STORE_UNAVAILABLE', { retryAfterMs: 1000 }),
      );
      expect(api.executions.count('charge')).toBe(0);
    } finally {
      await api.close();
    }
  });
});

describe.each(STORES)('socket.io acks and retries on the %s store', (store) => {
  const prefix = uniquePrefix(`gateways-retries-${store}`);
  let api: GatewayApp;
  beforeAll(async () => {
    api = await startGatewayApp('socket.io', storeOptions(store, prefix));
  });
  afterAll(async () => {
    await api?.close();
    await cleanUpPrefix(prefix);
  });

  it("runs a slow handler once under the client's retries, and acks the retry (wait)", async () => {
    // socket.io-client re-sends an event whose ack is late: the server gets it twice by design.
    const client = await api.connect(undefined, { retries: 3, ackTimeout: 200 });
    const message = { idempotencyKey: newKey(), amount: 9 };
    const waiting = api.executions.waitFor('waiting');
    const answer = client.socket!.emitWithAck('slowWait', message);
    const release = await api.executions.nextStarted();
    await waiting; // the client's retry reached the server, and waits for the first run
    release();
    expect(await answer).toEqual({ charged: 9, run: 1 });
    expect(api.executions.count('slowWait')).toBe(1);
  });

  it('answers a retry during the first run with the in-progress refusal in its ack', async () => {
    const client = await api.connect(undefined, { retries: 3, ackTimeout: 200 });
    const message = { idempotencyKey: newKey(), amount: 8 };
    const conflict = api.executions.waitFor('conflict');
    const answer = client.socket!.emitWithAck('slow', message);
    const release = await api.executions.nextStarted();
    await conflict;
    release();
    expect(await answer).toEqual(
      refusal('socket.io', 'IDEMPOTENCY_IN_PROGRESS', { retryAfterMs: expect.any(Number) }),
    );
    expect(api.executions.count('slow')).toBe(1);
  });

  it('sends a refusal as the exception event when the client asked for no ack', async () => {
    const client = await api.connect();
    const idempotencyKey = newKey();
    await client.request('charge', { idempotencyKey, amount: 1 });
    const exception = client.next('exception');
    client.send('charge', { idempotencyKey, amount: 2 });
    expect(await exception).toEqual(refusal('socket.io', 'IDEMPOTENCY_KEY_REUSED'));
  });
});

describe('@Idempotent() on gateways at boot', () => {
  it('refuses a handler that acks through @Ack(): a replay could not ack again', async () => {
    @WebSocketGateway()
    class AckingGateway {
      @SubscribeMessage('pay')
      @Idempotent()
      pay(@MessageBody() data: unknown, @Ack() ack: (value: unknown) => void) {
        ack(data);
      }
    }
    const boot = async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot()],
        providers: [AckingGateway],
      }).compile();
      try {
        await moduleRef.init();
      } finally {
        await moduleRef.close();
      }
    };
    await expect(boot()).rejects.toThrow(
      'IdempotencyModule: AckingGateway.pay acknowledges through @Ack()',
    );
  });
});
