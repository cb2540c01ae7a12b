import { MemoryIdempotencyStore } from '../../lib';

describe('MemoryIdempotencyStore limits', () => {
  const response = { meta: 'm', body: Buffer.from('b') };
  const claim = (store: MemoryIdempotencyStore, key: string) =>
    store.claim(key, { token: key, fingerprint: '', leaseMs: 60_000 });

  it('drops the oldest completed records to stay within maxEntries, never in-progress ones', async () => {
    const store = new MemoryIdempotencyStore({ maxEntries: 2, sweepIntervalMs: 0 });
    await claim(store, 'a');
    await store.complete('a', 'a', response, 60_000);
    await claim(store, 'b');
    expect(await claim(store, 'c')).toEqual({ status: 'claimed' });
    expect(store.size).toBe(2);
    expect((await claim(store, 'b')).status).toBe('in_progress');
    await expect(claim(store, 'd')).rejects.toThrow('MemoryIdempotencyStore is full');
  });
});
