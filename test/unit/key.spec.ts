import { IdempotencyKeyInvalidError } from '../../lib';
import { parseIdempotencyKey, recordKey } from '../../lib/utils/key';

describe('parseIdempotencyKey', () => {
  it.each([
    ['abc', 'abc'],
    ['  abc  ', 'abc'],
    ['"abc"', 'abc'],
    ['"a\\"b\\\\c"', 'a"b\\c'],
    ['8e03978e-40d5-43e8-bc93-6894a57f9324', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['x'.repeat(255), 'x'.repeat(255)],
  ])('accepts %j as %j', (raw, key) => {
    expect(parseIdempotencyKey(raw, 255)).toBe(key);
  });

  it.each([
    ['empty', ''],
    ['blank', '   '],
    ['an empty sf-string', '""'],
    ['too long', 'x'.repeat(256)],
    ['a control character', 'ab\u0001c'],
    ['a newline', 'ab\nc'],
    ['a NUL', 'ab\u0000c'],
    ['non-ASCII', 'clé'],
    ['a bad escape', '"a\\nb"'],
    ['an inner quote', '"a"b"'],
    ['repeated headers', ['a', 'b']],
    ['a number', 42],
  ])('rejects %s', (_, raw) => {
    expect(() => parseIdempotencyKey(raw, 255)).toThrow(IdempotencyKeyInvalidError);
  });
});

describe('recordKey', () => {
  it('hashes the client key into a hash tag, so no raw input reaches the key name', () => {
    const key = recordKey('idempotency:', 'Payments.create', 'evil*{tag}\r\n');
    expect(key).toMatch(/^idempotency:\{[A-Za-z0-9_-]{22}\}$/);
  });

  it('separates scopes: the same client key on two handlers gives two records', () => {
    expect(recordKey('p:', 'A.create', 'k')).not.toBe(recordKey('p:', 'B.create', 'k'));
  });
});
