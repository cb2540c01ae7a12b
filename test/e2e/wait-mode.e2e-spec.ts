import Redis from 'ioredis';
import { lastValueFrom } from 'rxjs';
import {
  IdempotencyModuleOptions,
  IdempotencyStore,
  MemoryIdempotencyStore,
  RedisIdempotencyStore,
} from '../../lib';
import { PATTERNS, startConsumer, transportSetup, withKey } from '../support/microservice-app';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import {
  RedisClusterProcesses,
  RedisProcess,
  startRedisCluster,
  startRedisServer,
} from '../support/redis-server';
import { Platform, post, startTestApp, TestApp } from '../support/test-app';
import { expectDuplicatesHeldThenReplayed } from '../support/wait-cases';

let seq = 0;
const newKey = () => `wait-${Date.now()}-${++seq}`;

interface StoreCase {
  name: string;
  platform: Platform;
  setUp(): Promise<IdempotencyModuleOptions>;
  tearDown(): Promise<void>;
}

let cluster: RedisClusterProcesses | undefined;
const sharedPrefix = uniquePrefix('wait');

const STORES: StoreCase[] = [
  {
    name: 'the memory store',
    platform: 'express',
    setUp: async () => ({}),
    tearDown: async () => {},
  },
  {
    name: 'Redis',
    platform: 'fastify',
    setUp: async () => ({ redis: testRedisUrl(), keyPrefix: sharedPrefix }),
    tearDown: async () => {
      const client = inspectionClient();
      await deleteKeysUnder(client, sharedPrefix);
      await client.quit();
    },
  },
  {
    name: 'a Redis Cluster (sharded pub/sub)',
    platform: 'express',
    setUp: async () => {
      cluster = await startRedisCluster({ masters: 3 });
      return { redis: { clusterNodes: cluster.nodes } };
    },
    tearDown: async () => cluster?.stop(),
  },
];

describe.each(STORES)("onConflict: 'wait' on $name", (store) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(store.platform, await store.setUp());
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await store.tearDown();
  });

  it('holds duplicates until the first request completes, then replays its response to each', () =>
    expectDuplicatesHeldThenReplayed(t));

  it('hands every waiter the stored response with the notification: no claim after it', async () => {
    expect(await claimsAfterRelease(t, 5)).toBe(0);
  });

  it('lets a waiting duplicate run the handler itself when the first request fails', async () => {
    const key = newKey();
    const body = { hold: true, failFirst: key };
    const firstStarted = t.executions.nextStarted();
    const first = post(t.url, '/payments/wait', { key, body });
    const releaseFirst = await firstStarted;
    const waiting = t.executions.waitFor('waiting');
    const duplicate = post(t.url, '/payments/wait', { key, body });
    await waiting;
    const secondStarted = t.executions.nextStarted();
    releaseFirst();
    expect((await first).status).toBe(402);
    (await secondStarted)();
    const second = await duplicate;
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.json()).toEqual({ run: expect.any(Number) });
  });

  it('answers 409 with Retry-After once waitTimeout has passed', async () => {
    const key = newKey();
    const started = t.executions.nextStarted();
    const first = post(t.url, '/payments/wait-briefly', { key });
    const release = await started;
    const duplicate = await post(t.url, '/payments/wait-briefly', { key });
    expect(duplicate.status).toBe(409);
    expect(Number(duplicate.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(t.executions.ofType('waiting').length).toBeGreaterThan(0);
    release();
    expect((await first).status).toBe(201);
  });

  it('takes the key over when the holder’s lease runs out without a word (a crashed holder)', async () => {
    const key = newKey();
    // A failing first run tells us the record key, then frees it.
    expect((await post(t.url, '/payments/wait', { key, body: { failFirst: key } })).status).toBe(
      402,
    );
    const [released] = t.executions.ofType('released').slice(-1);
    // A "crashed" holder: a claim that nobody renews, completes or releases.
    const ghost = await t.app
      .get(IdempotencyStore)
      .claim(released.key!, { token: 'ghost', fingerprint: '', leaseMs: 300 });
    expect(ghost).toEqual({ status: 'claimed' });
    const response = await post(t.url, '/payments/wait', { key, body: { failFirst: key } });
    expect(response.status).toBe(201);
    expect(response.headers.get('idempotent-replayed')).toBeNull();
  });
});

/**
 * Holds a key, lets `waiters` duplicates wait on it, then releases the holder: returns how many
 * claims the store saw from that moment until every waiter had its (replayed) answer.
 */
async function claimsAfterRelease(t: TestApp, waiters: number): Promise<number> {
  const store = t.app.get(IdempotencyStore);
  const claim = store.claim.bind(store);
  const issued: Promise<unknown>[] = [];
  const spy = jest.spyOn(store, 'claim').mockImplementation((key, request) => {
    const result = claim(key, request);
    issued.push(result);
    return result;
  });
  try {
    const key = newKey();
    const started = t.executions.nextStarted();
    const first = post(t.url, '/payments/wait', { key, body: { hold: true } });
    const release = await started;
    const waiting = t.executions.waitFor('waiting', waiters);
    const duplicates = Array.from({ length: waiters }, () =>
      post(t.url, '/payments/wait', { key, body: { hold: true } }),
    );
    await waiting;
    // Each waiter claimed again once it watched; once those have answered, all of them sleep.
    await Promise.allSettled(issued);
    await new Promise(setImmediate);
    const before = issued.length;
    release();
    const answers = await Promise.all(duplicates);
    expect(answers.map((answer) => answer.headers.get('idempotent-replayed'))).toEqual(
      Array(waiters).fill('true'),
    );
    expect((await first).status).toBe(201);
    return issued.length - before;
  } finally {
    spy.mockRestore();
  }
}

/** A custom store that can notify but does not hand over the response. */
class BareNotifyingStore extends MemoryIdempotencyStore {
  override watch(key: string, listener: () => void) {
    return super.watch(key, () => listener());
  }
}

describe("onConflict: 'wait' on a store that notifies without the response", () => {
  it('wakes the waiters of a key with one shared claim', async () => {
    const t = await startTestApp('express', { store: new BareNotifyingStore() });
    try {
      expect(await claimsAfterRelease(t, 5)).toBe(1);
    } finally {
      await t.close();
    }
  });
});

describe("onConflict: 'wait' on a private redis-server", () => {
  let server: RedisProcess;
  let inspect: Redis;
  let t: TestApp;

  beforeAll(async () => {
    server = await startRedisServer();
    inspect = new Redis(server.url);
    t = await startTestApp('express', { redis: server.url });
  });
  afterAll(async () => {
    await t?.close();
    inspect?.disconnect();
    await server?.stop();
  });

  /** Connections to this server in subscriber mode. */
  const subscribers = async () =>
    String(await inspect.client('LIST'))
      .split('\n')
      .filter((line) => /\bsub=[1-9]/.test(line)).length;

  it('uses one subscriber connection for every waiter, and unsubscribes when they are done', async () => {
    const keys = [newKey(), newKey(), newKey()];
    const held: Promise<unknown>[] = [];
    const releases: (() => void)[] = [];
    for (const key of keys) {
      const started = t.executions.nextStarted();
      held.push(post(t.url, '/payments/wait', { key, body: { hold: true } }));
      releases.push(await started);
    }
    const waiting = t.executions.waitFor('waiting', 6);
    const duplicates = keys.flatMap((key) =>
      [1, 2].map(() => post(t.url, '/payments/wait', { key, body: { hold: true } })),
    );
    await waiting;
    expect(await subscribers()).toBe(1);
    expect(await inspect.pubsub('CHANNELS')).toHaveLength(3);
    releases.forEach((release) => release());
    const answers = await Promise.all(duplicates);
    expect(answers.map((answer) => answer.status)).toEqual([201, 201, 201, 201, 201, 201]);
    await Promise.all(held);
    expect(await inspect.pubsub('CHANNELS')).toEqual([]);
  });

  it('hands watchers responses up to 64 KiB, and notifies bare above that', async () => {
    const client = new Redis(server.url);
    const store = new RedisIdempotencyStore(client);
    try {
      for (const [size, handedOver] of [
        [65_536, true],
        [65_537, false],
      ] as const) {
        const key = newKey();
        const body = Buffer.alloc(size, 7);
        await store.claim(key, { token: 'a', fingerprint: 'fp', leaseMs: 10_000 });
        let notified!: (completed: unknown) => void;
        const message = new Promise((resolve) => (notified = resolve));
        const unwatch = await store.watch(key, (completed) => notified(completed));
        await store.claim(key, { token: 'b', fingerprint: 'fp', leaseMs: 10_000, waiting: true });
        expect(await store.complete(key, 'a', { meta: '{}', body }, 60_000)).toBe(true);
        const completed = await message;
        unwatch();
        expect(completed).toEqual(
          handedOver ? { fingerprint: 'fp', response: { meta: '{}', body } } : undefined,
        );
        const replay = await store.claim(key, { token: 'b', fingerprint: 'fp', leaseMs: 10_000 });
        expect(replay).toEqual({ status: 'completed', response: { meta: '{}', body } });
      }
    } finally {
      await store.close();
      await client.quit();
    }
  });

  it('refuses to watch once the store is closed, and opens no subscriber for it', async () => {
    const client = new Redis(server.url);
    const store = new RedisIdempotencyStore(client);
    await store.close();
    await expect(store.watch(newKey(), () => {})).rejects.toThrow('closed');
    expect(await subscribers()).toBe(0);
    await client.quit();
  });

  it('answers 409 with a store_error event when the store stops answering during a wait', async () => {
    const app = await startTestApp('express', { redis: server.url, storeTimeout: 300 });
    try {
      const key = newKey();
      const body = { failFirst: key };
      expect((await post(app.url, '/payments/wait', { key, body })).status).toBe(402);
      const [released] = app.executions.ofType('released').slice(-1);
      await app.app
        .get(IdempotencyStore)
        .claim(released.key!, { token: 'ghost', fingerprint: '', leaseMs: 500 });
      const waiting = app.executions.waitFor('waiting');
      const duplicate = post(app.url, '/payments/wait', { key, body });
      await waiting;
      process.kill(server.pid, 'SIGSTOP'); // the waiter's next claim gets no answer
      try {
        expect((await duplicate).status).toBe(409);
        expect(app.executions.ofType('store_error')).toHaveLength(1);
      } finally {
        process.kill(server.pid, 'SIGCONT');
      }
    } finally {
      await app.close();
    }
  });

  it('publishes nothing when nobody waits', async () => {
    await inspect.config('RESETSTAT');
    const key = newKey();
    expect((await post(t.url, '/payments/wait', { key, body: {} })).status).toBe(201);
    const stats = String(await inspect.info('commandstats'));
    expect(stats).not.toMatch(/cmdstat_publish:/);
  });
});

describe("onConflict: 'wait' on a @MessagePattern handler (TCP)", () => {
  it('holds a duplicate message until the first completes, then replies with the same result', async () => {
    const setup = await transportSetup('tcp');
    const consumer = await startConsumer(setup, {});
    try {
      const key = newKey();
      const send = () =>
        lastValueFrom(consumer.client.send(PATTERNS.wait, withKey(setup, {}, key)));
      const started = consumer.executions.nextStarted();
      const first = send();
      const release = await started;
      const waiting = consumer.executions.waitFor('waiting');
      const duplicate = send();
      await waiting;
      release();
      expect(await first).toEqual({ run: 1 });
      expect(await duplicate).toEqual({ run: 1 });
      expect(consumer.executions.count('wait')).toBe(1);
    } finally {
      await consumer.close();
    }
  });
});
