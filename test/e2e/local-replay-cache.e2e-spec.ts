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

/** The Redis store, counting the claims it is asked for. */
class CountingRedisStore extends RedisIdempotencyStore {
  claims = 0;
  override claim(key: string, request: ClaimRequest) {
    this.claims++;
    return super.claim(key, request);
  }
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
});
