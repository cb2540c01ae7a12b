import { INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import type { Pool } from 'pg';
import {
  IdempotencyEvent,
  IdempotencyInProgressError,
  IdempotencyKeyReusedError,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyService,
  IdempotencyStore,
  IdempotentMethod,
} from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { deferred } from '../support/test-app';

/** An error a run() stores (`storeErrors`), with a field of its own. */
class DeclinedError extends Error {
  constructor(
    message: string,
    readonly declineCode: string,
  ) {
    super(message);
  }
}

/** A provider whose method runs once per order id. */
@Injectable()
class Invoices {
  sent = 0;

  @IdempotentMethod({
    key: (orderId: string, _total: number) => orderId,
    fingerprint: (_orderId, total) => total,
  })
  async send(
    orderId: string,
    total: number,
  ): Promise<{ orderId: string; total: number; at: Date }> {
    this.sent++;
    return { orderId, total, at: new Date(Date.UTC(2026, 10, 25, 18, 0, this.sent)) };
  }
}

const STORES = ['memory', 'redis', 'postgres'] as const;

describe.each(STORES)('IdempotencyService.run() on the %s store', (kind) => {
  const prefix = uniquePrefix(`run-${kind}`);
  const table = uniqueTable('run_records');
  const bus = new EventEmitter();
  let app: INestApplicationContext;
  let service: IdempotencyService;
  let store: IdempotencyStore;
  let redis: Redis | undefined;
  let pool: Pool | undefined;

  beforeAll(async () => {
    const backing: IdempotencyModuleOptions =
      kind === 'redis'
        ? { redis: testRedisUrl() }
        : kind === 'postgres'
          ? { postgres: { connectionString: testPostgresUrl(), table, ensureSchema: true } }
          : {};
    if (kind === 'redis') redis = inspectionClient();
    if (kind === 'postgres') pool = await testPool();
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          ...backing,
          keyPrefix: prefix,
          onEvent: (event) => bus.emit(event.type, event),
        }),
      ],
      providers: [Invoices],
    })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    await app.init();
    service = app.get(IdempotencyService);
    store = app.get(IdempotencyStore);
  });
  afterAll(async () => {
    await app?.close();
    if (redis) {
      await deleteKeysUnder(redis, prefix);
      await redis.quit();
    }
    if (pool) {
      await dropTable(pool, table);
      await pool.end();
    }
  });

  /** Resolves with the next event of `type`, from now on. */
  async function nextEvent(type: IdempotencyEvent['type']): Promise<IdempotencyEvent> {
    const [event] = (await once(bus, type)) as [IdempotencyEvent];
    return event;
  }

  it('runs fn once and returns its stored result, Date, bigint and Buffer included', async () => {
    const key = randomUUID();
    let runs = 0;
    const fn = async () => {
      runs++;
      return { at: new Date('2026-11-25T18:00:00Z'), cents: 2n ** 70n, pdf: Buffer.from('%PDF') };
    };
    const first = await service.run(key, fn, { scope: 'invoices' });
    const again = await service.run(key, fn, { scope: 'invoices' });
    expect(runs).toBe(1);
    expect(again).toEqual(first);
    expect(again.at).toBeInstanceOf(Date);
    expect(again.cents).toBe(2n ** 70n);
    expect(Buffer.isBuffer(again.pdf) && again.pdf.toString()).toBe('%PDF');
    // The same key in another scope is another record.
    await service.run(key, fn, { scope: 'receipts' });
    expect(runs).toBe(2);
  });

  it('makes a concurrent call wait for the outcome and return it, without running fn', async () => {
    const key = randomUUID();
    const gate = deferred();
    let runs = 0;
    const fn = async () => {
      runs++;
      await gate.promise;
      return `ran ${runs}`;
    };
    const claimed = nextEvent('claimed');
    const first = service.run(key, fn);
    await claimed;
    const waiting = nextEvent('waiting');
    const second = service.run(key, fn);
    await waiting;
    gate.resolve();
    await expect(first).resolves.toBe('ran 1');
    await expect(second).resolves.toBe('ran 1');
    expect(runs).toBe(1);
  });

  it("rejects a concurrent call with IdempotencyInProgressError under onConflict: 'reject'", async () => {
    const key = randomUUID();
    const gate = deferred();
    const claimed = nextEvent('claimed');
    const first = service.run(key, () => gate.promise.then(() => 'first'));
    await claimed;
    const second = service.run(key, async () => 'second', { onConflict: 'reject' });
    await expect(second).rejects.toBeInstanceOf(IdempotencyInProgressError);
    gate.resolve();
    await expect(first).resolves.toBe('first');
  });

  it('releases the key when fn throws and rethrows: the next call runs fn again', async () => {
    const key = randomUUID();
    const failure = new Error('smtp down');
    await expect(service.run(key, () => Promise.reject(failure))).rejects.toBe(failure);
    await expect(service.run(key, async () => 'sent')).resolves.toBe('sent');
  });

  it('stores an error storeErrors match and throws an equivalent one on replay', async () => {
    const key = randomUUID();
    let runs = 0;
    const fn = async (): Promise<string> => {
      runs++;
      throw new DeclinedError('card declined', 'insufficient_funds');
    };
    const options = { storeErrors: [DeclinedError] };
    await expect(service.run(key, fn, options)).rejects.toBeInstanceOf(DeclinedError);
    const replayed = await service.run(key, fn, options).catch((error: unknown) => error);
    expect(runs).toBe(1);
    expect(replayed).toBeInstanceOf(DeclinedError);
    expect(replayed).toMatchObject({ message: 'card declined', declineCode: 'insufficient_funds' });
  });

  it('throws IdempotencyKeyReusedError when the fingerprint differs from the first call', async () => {
    const key = randomUUID();
    await service.run(key, async () => 1, { fingerprint: { to: 'a@example.com' } });
    await expect(
      service.run(key, async () => 1, { fingerprint: { to: 'a@example.com' } }),
    ).resolves.toBe(1);
    await expect(
      service.run(key, async () => 2, { fingerprint: { to: 'b@example.com' } }),
    ).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
  });

  it('renews the lease while fn runs: a call after several lease lengths still finds it in progress', async () => {
    const key = randomUUID();
    const extend = store.extend.bind(store);
    let renewals = 0;
    const renewed = deferred();
    store.extend = async (...args) => {
      const owned = await extend(...args);
      if (owned && ++renewals === 4) renewed.resolve();
      return owned;
    };
    try {
      const gate = deferred();
      // A lease long enough that a busy CI machine renews it in time (a third of it apart).
      const first = service.run(key, () => gate.promise.then(() => 'done'), { lockTtl: 900 });
      // Four renewals, a third of the lease apart: past the first lease (900 ms) and beyond.
      await renewed.promise;
      await expect(
        service.run(key, async () => 'twice', { onConflict: 'reject', lockTtl: 900 }),
      ).rejects.toBeInstanceOf(IdempotencyInProgressError);
      gate.resolve();
      await expect(first).resolves.toBe('done');
    } finally {
      store.extend = extend;
    }
  });

  it('fences a zombie: a call whose lease was taken over cannot overwrite the new result', async () => {
    const key = randomUUID();
    const gate = deferred();
    const claimed = nextEvent('claimed');
    const zombie = service.run(key, () => gate.promise.then(() => 'zombie'));
    const { key: recordKey } = await claimed;
    // Its lease is gone (as after a stall past lockTtl): another call takes the key over.
    await store.delete(recordKey!);
    await expect(service.run(key, async () => 'winner')).resolves.toBe('winner');
    const fenced = nextEvent('fenced');
    gate.resolve();
    await expect(zombie).resolves.toBe('zombie'); // it ran, but its result is not the stored one
    await fenced;
    await expect(service.run(key, async () => 'again')).resolves.toBe('winner');
  });

  it('@IdempotentMethod() runs a provider method once per key', async () => {
    const invoices = app.get(Invoices);
    const orderId = randomUUID();
    const first = await invoices.send(orderId, 100);
    const again = await invoices.send(orderId, 100);
    expect(invoices.sent).toBe(1);
    expect(again).toEqual(first);
    expect(again.at).toBeInstanceOf(Date);
    await expect(invoices.send(orderId, 200)).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
  });

  it('refuses an empty key and transactional on a store that cannot write in a transaction', async () => {
    await expect(service.run('', async () => 1)).rejects.toThrow(/idempotency key/);
    if (kind !== 'postgres') {
      await expect(service.run('k', async () => 1, { transactional: true })).rejects.toThrow(
        /transactional/,
      );
    }
  });
});
