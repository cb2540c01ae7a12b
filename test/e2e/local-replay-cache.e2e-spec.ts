import { Body, Controller, Module, Post } from '@nestjs/common';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import {
  type ClaimRequest,
  IdempotencyModule,
  IdempotencyRecords,
  Idempotent,
  RedisIdempotencyStore,
} from '../../lib';
import { listen } from '../support/http-app';
import { deleteKeysUnder, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';

// Option localReplayCache on the Redis store: replays after the first one skip the store; a
// record an operator deletes in this process is forgotten; another payload still reaches the
// store (422); encrypted records stay sealed in memory and replay the same.

const keyPrefix = uniquePrefix('local-replay');
let runs = 0;

@Controller()
class PaymentsController {
  @Post('payments')
  @Idempotent({ scope: 'public' })
  create(@Body() body: { amount: number }) {
    return { id: `payment-${++runs}`, amount: body.amount };
  }
}

/** The Redis store, counting the claims it is asked for; a test may hold a claim or a delete. */
class CountingRedisStore extends RedisIdempotencyStore {
  claims = 0;
  /**
   * While set: `read` is called when a claim has read the store; then claims wait for `claims`,
   * and deletes wait for `deletes` before deleting.
   */
  hold?: { claims?: Promise<void>; deletes?: Promise<void>; read?: () => void };
  override async claim(key: string, request: ClaimRequest) {
    this.claims++;
    const result = await super.claim(key, request);
    this.hold?.read?.();
    await this.hold?.claims;
    return result;
  }
  override async delete(key: string) {
    await this.hold?.deletes;
    return super.delete(key);
  }
}

/** A promise and what settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe.each([
  ['plaintext', {}],
  ['encrypted', { encryption: { keys: ['local-replay-cache-e2e-key-0123456789abcdef'] } }],
])('localReplayCache on Redis (%s)', (_name, extra) => {
  const client = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
  const store = new CountingRedisStore(client);
  let url: string;
  let close: () => Promise<void>;
  let records: IdempotencyRecords;

  beforeAll(async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ store, keyPrefix, localReplayCache: true, ...extra })],
      controllers: [PaymentsController],
    })
    class AppModule {}
    const started = await listen('express', AppModule);
    url = started.url;
    records = started.app.get(IdempotencyRecords);
    close = () => started.app.close();
  });
  afterAll(async () => {
    await close?.();
    await deleteKeysUnder(client, keyPrefix);
    await client.quit();
  });

  const pay = (key: string, amount = 100) => post(url, '/payments', { key, body: { amount } });

  it('replays from memory after the first replay, byte for byte, without a store call', async () => {
    const key = randomUUID();
    const first = await pay(key);
    const fromStore = await pay(key);
    const before = store.claims;
    const fromMemory = await pay(key);
    expect(store.claims).toBe(before);
    expect(fromStore.headers.get('idempotent-replayed')).toBe('true');
    expect(fromMemory.headers.get('idempotent-replayed')).toBe('true');
    expect([fromStore.text, fromMemory.text]).toEqual([first.text, first.text]);
    expect(fromMemory.status).toBe(first.status);
  });

  it('asks the store for another payload under the key (422)', async () => {
    const key = randomUUID();
    await pay(key);
    await pay(key);
    const before = store.claims;
    expect((await pay(key, 999)).status).toBe(422);
    expect(store.claims).toBe(before + 1);
  });

  it('forgets a record deleted through IdempotencyRecords in this process', async () => {
    const key = randomUUID();
    const first = await pay(key);
    await pay(key);
    await records.delete({ key, route: 'POST /payments' });
    const again = await pay(key);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(again.json()).not.toEqual(first.json());
  });

  it('forgets a record deleted while a replay was reading it from the store', async () => {
    // A replay that read the record from the store while delete() ran (started before it, or
    // after it began) must not put it back in memory: once delete() resolves, the next request
    // runs the handler.
    for (const replayStarts of ['before the delete', 'during the delete'] as const) {
      const key = randomUUID();
      const first = await pay(key);
      const [read, release] = [gate(), gate()];
      let replay: ReturnType<typeof pay>;
      if (replayStarts === 'before the delete') {
        store.hold = { claims: release.opened, read: read.open };
        replay = pay(key);
        await read.opened;
        expect(await records.delete({ key, route: 'POST /payments' })).toBe(true);
        release.open();
      } else {
        store.hold = { deletes: release.opened, read: read.open };
        const deleting = records.delete({ key, route: 'POST /payments' });
        replay = pay(key);
        await read.opened;
        release.open();
        expect(await deleting).toBe(true);
      }
      expect((await replay).headers.get('idempotent-replayed')).toBe('true');
      store.hold = undefined;
      const again = await pay(key);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(again.json()).not.toEqual(first.json());
    }
  });
});
