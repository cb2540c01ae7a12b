import { MemoryIdempotencyStore } from '../../lib';
import { STUCK_RETENTION_MS } from '../../lib/stores/memory/memory-listing';

describe('MemoryIdempotencyStore listing', () => {
  let now = 1_000_000;
  const store = new MemoryIdempotencyStore({ now: () => now, sweepIntervalMs: 0 });
  const about = { route: 'POST /jobs', label: 'label' };
  const claim = (key: string, leaseMs = 1_000) =>
    store.claim(key, { token: 't', fingerprint: '', leaseMs, about });
  afterAll(() => store.close());

  it('lists a claim that died without steps as stuck for a day from its claim, then forgets it', async () => {
    await claim('stuck:{a}');
    now += 2_000;
    expect((await store.countRecords('stuck:')).stuck).toBe(1);
    now += STUCK_RETENTION_MS - 2_000 - 1;
    const { items } = await store.list({ prefix: 'stuck:', state: 'stuck', limit: 10 });
    expect(items.map((item) => [item.key, item.about])).toEqual([['stuck:{a}', about]]);
    now += 1;
    expect(await store.countRecords('stuck:')).toEqual({
      running: 0,
      stuck: 0,
      half_done: 0,
      completed: 0,
    });
  });

  it('forgets a run whose steps expired after its release', async () => {
    await store.claim('half:{a}', { token: 't', fingerprint: '', leaseMs: 1_000, resumable: true });
    const result = { meta: 'm', body: Buffer.from('b') };
    await store.recordStep('half:{a}', 't', { index: 0, name: 'order', result }, 5_000);
    await store.release('half:{a}', 't');
    expect((await store.countRecords('half:')).half_done).toBe(1);
    now += 5_000;
    expect((await store.countRecords('half:')).half_done).toBe(0);
    expect(await store.markAbandoned('half:{a}', Number.MAX_SAFE_INTEGER)).toBe(false);
  });

  it('lists nothing for keys without a {hash tag}, which have no key prefix', async () => {
    await claim('plain');
    expect((await store.list({ prefix: '', state: 'running', limit: 10 })).items).toEqual([]);
    expect((await store.list({ prefix: 'plain', state: 'running', limit: 10 })).items).toEqual([]);
  });

  it('refuses a cursor it did not return', async () => {
    const query = { prefix: 'p:', state: 'running' as const, limit: 10 };
    await expect(store.list({ ...query, cursor: 'nope' })).rejects.toThrow(TypeError);
    const forged = Buffer.from('["1", "k"]').toString('base64url');
    await expect(store.list({ ...query, cursor: forged })).rejects.toThrow('cursor');
  });
});
