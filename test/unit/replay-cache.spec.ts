import { ReplayCache } from '../../lib/core/replay-cache';
import { resolveModuleOptions } from '../../lib/options';

const response = (bytes: number) => ({ meta: '{"k":"j"}', body: Buffer.alloc(bytes) });

describe('ReplayCache (option localReplayCache)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('replays a kept outcome for the same fingerprint only, until its ttl', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1_000_000, ttl: 1_000 });
    const kept = response(10);
    cache.set('k', 'fp', kept, cache.mark());
    expect(cache.get('k', 'fp')).toBe(kept);
    expect(cache.get('k', 'other')).toBeUndefined();
    jest.advanceTimersByTime(999);
    expect(cache.get('k', 'fp')).toBe(kept);
    jest.advanceTimersByTime(1);
    expect(cache.get('k', 'fp')).toBeUndefined();
  });

  it('lets the least recently replayed go first, by entries and by bytes', () => {
    const cache = new ReplayCache({ maxEntries: 2, maxBytes: 1_000, ttl: 60_000 });
    cache.set('a', '', response(10), cache.mark());
    cache.set('b', '', response(10), cache.mark());
    cache.get('a', '');
    cache.set('c', '', response(10), cache.mark());
    expect([cache.get('a', ''), cache.get('b', ''), cache.get('c', '')].map(Boolean)).toEqual([
      true,
      false,
      true,
    ]);
    // 30 bytes each (body and meta), a tenth of maxBytes: the eleventh pushes the first out.
    const bytes = new ReplayCache({ maxEntries: 100, maxBytes: 300, ttl: 60_000 });
    for (let i = 0; i < 11; i++) bytes.set(`k${i}`, '', response(21), bytes.mark());
    expect(bytes.get('k0', '')).toBeUndefined();
    expect(bytes.get('k1', '')).toBeDefined();
    expect(bytes.get('k10', '')).toBeDefined();
  });

  it('keeps nothing over a tenth of maxBytes, and forgets a deleted record', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1_000, ttl: 60_000 });
    cache.set('big', '', response(200), cache.mark());
    expect(cache.get('big', '')).toBeUndefined();
    cache.set('k', '', response(10), cache.mark());
    cache.delete('k');
    expect(cache.get('k', '')).toBeUndefined();
  });

  it('keeps no outcome read from the store while a deletion ran', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1_000, ttl: 60_000 });
    const mark = cache.mark(); // a replay starts reading the store
    cache.delete('other'); // an operator deletes a record meanwhile
    cache.set('k', '', response(10), mark);
    expect(cache.get('k', '')).toBeUndefined();
    cache.set('k', '', response(10), cache.mark());
    expect(cache.get('k', '')).toBeDefined();
  });
});

describe('the option localReplayCache', () => {
  it('is off by default, takes true for the defaults and a duration string for ttl', () => {
    expect(resolveModuleOptions({}).localReplayCache).toBe(false);
    expect(resolveModuleOptions({ localReplayCache: true }).localReplayCache).toEqual({
      maxEntries: 1_000,
      maxBytes: 16 * 1024 * 1024,
      ttl: 10_000,
    });
    expect(resolveModuleOptions({ localReplayCache: { ttl: '2m' } }).localReplayCache).toEqual({
      maxEntries: 1_000,
      maxBytes: 16 * 1024 * 1024,
      ttl: 120_000,
    });
  });

  it.each([
    [{ maxEntires: 5 }, /unknown option `maxEntires` \(did you mean `maxEntries`\?\)/],
    [{ maxEntries: 0 }, /maxEntries must be a positive whole number/],
    [{ maxBytes: 1.5 }, /maxBytes must be a positive whole number/],
    [{ ttl: 'soon' }, /ttl must be milliseconds or a duration string/],
    ['yes', /localReplayCache must be a boolean or/],
  ])('refuses %j at boot', (value, message) => {
    expect(() => resolveModuleOptions({ localReplayCache: value as unknown as boolean })).toThrow(
      message,
    );
  });
});
