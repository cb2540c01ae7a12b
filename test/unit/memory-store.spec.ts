import { MemoryIdempotencyStore } from '../../lib';

describe('MemoryIdempotencyStore limits', () => {
  const response = { meta: 'm', body: Buffer.from('b') };
  /** A claim of `key` by the owner `token` (by default the key: one owner per key). */
  const claim = (store: MemoryIdempotencyStore, key: string, token = key) =>
    store.claim(key, { token, fingerprint: '', leaseMs: 60_000 });

  it('drops the oldest completed records to stay within maxEntries, never in-progress ones', async () => {
    const store = new MemoryIdempotencyStore({ maxEntries: 2, sweepIntervalMs: 0 });
    await claim(store, 'a');
    await store.complete('a', 'a', response, 60_000);
    await claim(store, 'b');
    expect(await claim(store, 'c')).toEqual({ status: 'claimed' });
    expect(store.size).toBe(2);
    expect((await claim(store, 'b', 'another owner')).status).toBe('in_progress');
    await expect(claim(store, 'd')).rejects.toThrow('MemoryIdempotencyStore is full');
  });

  it('drops the oldest completed records to stay within maxBytes; a larger one is kept alone', async () => {
    const store = new MemoryIdempotencyStore({ maxBytes: 2_500, sweepIntervalMs: 0 });
    const kilobyte = { meta: 'm', body: Buffer.alloc(1_000) };
    for (const key of ['a', 'b', 'c']) {
      await claim(store, key);
      await store.complete(key, key, kilobyte, 60_000);
    }
    // a made room for c; b and c hold 2 * 1 002 bytes.
    expect((await claim(store, 'a')).status).toBe('claimed');
    expect((await claim(store, 'b')).status).toBe('completed');
    expect((await claim(store, 'c')).status).toBe('completed');
    await claim(store, 'big');
    await store.complete('big', 'big', { meta: 'm', body: Buffer.alloc(5_000) }, 60_000);
    expect((await claim(store, 'big')).status).toBe('completed');
    expect((await claim(store, 'b')).status).toBe('claimed');
    expect((await claim(store, 'c')).status).toBe('claimed');
  });

  it('evicts by completion order: a slow request claimed first keeps its fresh response', async () => {
    const store = new MemoryIdempotencyStore({ maxBytes: 2_500, sweepIntervalMs: 0 });
    const kilobyte = { meta: 'm', body: Buffer.alloc(1_000) };
    await claim(store, 'slow');
    await claim(store, 'fast');
    await store.complete('fast', 'fast', kilobyte, 60_000);
    await store.complete('slow', 'slow', kilobyte, 60_000);
    await claim(store, 'next');
    await store.complete('next', 'next', kilobyte, 60_000);
    expect((await claim(store, 'slow')).status).toBe('completed');
    expect((await claim(store, 'fast')).status).toBe('claimed');
  });

  it('keeps 300 completed 0.9 MB responses within the default 32 MiB', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const body = Buffer.alloc(900_000);
    for (let i = 0; i < 300; i++) {
      await claim(store, `k${i}`);
      await store.complete(`k${i}`, `k${i}`, { meta: 'm', body }, 60_000);
    }
    // 37 responses fit in 32 MiB: the 263 oldest were dropped.
    expect(store.size).toBe(37);
  });

  it('measures leases on a monotonic clock: a wall-clock step frees no running claim', async () => {
    const real = Date.now.bind(Date);
    let offset = 0;
    const step = jest.spyOn(Date, 'now').mockImplementation(() => real() + offset);
    try {
      const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
      await claim(store, 'held');
      offset = 3_600_000;
      const other = await store.claim('held', { token: 'other', fingerprint: '', leaseMs: 60_000 });
      expect(other.status).toBe('in_progress');
    } finally {
      step.mockRestore();
    }
  });
});
