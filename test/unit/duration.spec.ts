import { parseDuration } from '../../lib/options/duration';
import { validateOptions } from '../../lib/options';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['1.5s', 1_500],
    ['0.1s', 100],
    ['2m', 120_000],
    ['24h', 86_400_000],
    ['1d', 86_400_000],
    [' 30 s ', 30_000],
    ['30000', 30_000],
    [250, 250],
  ])('reads %j as %d ms', (value, ms) => {
    expect(parseDuration(value, 'ttl')).toBe(ms);
  });

  it.each(['', 'soon', '2 days', '-1s', '1w', '1h30m', 's', '1e3'])(
    'refuses %j, naming the option',
    (value) => {
      expect(() => parseDuration(value, 'lockTtl')).toThrow(
        `lockTtl must be milliseconds or a duration string such as '500ms', '30s', '2m', '24h' or '1d', got ${JSON.stringify(value)}`,
      );
    },
  );

  it('is applied where options are validated, for every duration option', () => {
    expect(
      validateOptions(
        { ttl: '24h', lockTtl: '30s', storeTimeout: '2s', waitTimeout: '500ms' },
        '@Idempotent()',
      ),
    ).toEqual({ ttl: 86_400_000, lockTtl: 30_000, storeTimeout: 2_000, waitTimeout: 500 });
    expect(() => validateOptions({ ttl: '0.5ms' }, '@Idempotent()')).toThrow(
      '@Idempotent(): ttl must be a positive whole number, got 0.5',
    );
  });
});
