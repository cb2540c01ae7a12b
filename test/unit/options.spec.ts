import { validateOptions } from '../../lib/options';
import type { IdempotencyOptions } from '../../lib';

const check = (options: IdempotencyOptions) => () => validateOptions(options, '@Idempotent()');

describe('route options of issue 15 and 16, checked when the decorator is evaluated', () => {
  it.each([
    [{ keySpace: '' }, /keySpace must be a non-empty string/],
    [{ keySpace: 7 as never }, /keySpace must be a non-empty string/],
    [{ keySpace: 'payments\0t:acme' }, /keySpace must be a non-empty string without control/],
    [{ fingerprint: 'yes' as never }, /fingerprint must be a boolean or a function/],
    [{ statusHeader: 'bad header' }, /valid HTTP header name/],
    [{ statusHeader: 'Set-Cookie' }, /statusHeader cannot be Set-Cookie/],
    [{ statusHeader: 'idempotent-replayed' }, /statusHeader cannot be/],
    [{ statusHeader: 'Content-Type' }, /statusHeader cannot be/],
    [{ storeErrors: 402 as never }, /storeErrors must be an array/],
    [{ storeErrors: ['6xx' as never] }, /storeErrors holds "6xx"/],
    [{ storeErrors: [99] }, /storeErrors holds 99/],
    [{ transactional: 'yes' as never }, /transactional must be a boolean or \{ connectionName/],
    [{ transactional: { connectionName: 1 } as never }, /transactional must be/],
    [{ enabled: 'no' as never }, /enabled must be a boolean/],
  ])('refuses %j', (options, message) => {
    expect(check(options)).toThrow(message);
  });

  it.each([
    { keySpace: 'payments' },
    { fingerprint: () => 1 },
    { statusHeader: true },
    { statusHeader: 'X-Idempotency-Outcome' },
    { storeErrors: [402, '4xx', Error, () => true] as IdempotencyOptions['storeErrors'] },
    { transactional: { connectionName: 'ledger' } },
    { enabled: false },
  ] as IdempotencyOptions[])('accepts %j', (options) => {
    expect(check(options)).not.toThrow();
  });
});

describe('maxLockHold', () => {
  it.each([0, -1, 1.5, 'an hour' as never])('refuses %p', (maxLockHold) => {
    expect(check({ maxLockHold })).toThrow(/maxLockHold/);
  });

  it('takes milliseconds', () => {
    expect(check({ maxLockHold: 90_000 })).not.toThrow();
  });
});
