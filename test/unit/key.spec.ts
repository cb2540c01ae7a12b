import { IdempotencyKeyInvalidError } from '../../lib';
import { parseIdempotencyKey } from '../../lib/utils/key';

describe('parseIdempotencyKey (the Idempotency-Key header)', () => {
  it.each([
    ['abc', 'abc'],
    ['  abc  ', 'abc'],
    ['"abc"', 'abc'],
    ['"a\\"b\\\\c"', 'a"b\\c'],
    ['"a, b"', 'a, b'],
    ['"with space"', 'with space'],
    ['"abc";p=1', 'abc'],
    ['"abc"; a; b=?0;c=-1.5;d=tok/en:x;e=:aGk=:;f="x\\"y";*g=12', 'abc'],
    ['8e03978e-40d5-43e8-bc93-6894a57f9324', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['ord_123:retry=2', 'ord_123:retry=2'],
    ['sp ace', 'sp ace'],
    ['x'.repeat(255), 'x'.repeat(255)],
  ])('accepts %j as %j', (raw, key) => {
    expect(parseIdempotencyKey(raw, 255, true)).toBe(key);
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
    ['an escaped closing quote', '"x\\"'],
    ['no closing quote', '"abc'],
    ['a list in one header', 'a, b'],
    ['a list of strings', '"a", "b"'],
    ['a bare key with a parameter', 'abc;p=1'],
    ['a bare key with a quote', 'a"b'],
    ['a bare key with a backslash', 'a\\b'],
    ['an uppercase parameter key', '"abc";P=1'],
    ['a parameter without key', '"abc";=1'],
    ['a malformed parameter value', '"abc";p=@'],
    ['a parameter value too long', '"abc";p=1234567890123456'],
    ['space before a parameter', '"abc" ;p=1'],
    ['a trailing semicolon', '"abc";'],
    ['repeated headers', ['a', 'b']],
  ])('rejects %s', (_, raw) => {
    expect(() => parseIdempotencyKey(raw, 255, true)).toThrow(IdempotencyKeyInvalidError);
  });
});

describe('parseIdempotencyKey (keys from the key option or a message)', () => {
  it.each([
    ['abc', 'abc'],
    [' a, b;c ', 'a, b;c'],
    ['"abc"', '"abc"'],
    [42, '42'],
    [0, '0'],
    [-7, '-7'],
    [2 ** 53 - 1, '9007199254740991'],
    [12345678901234567890n, '12345678901234567890'],
  ])('takes %p as it is: %j', (raw, key) => {
    expect(parseIdempotencyKey(raw, 255)).toBe(key);
  });

  it.each([[''], ['ab\nc'], ['x'.repeat(256)], [['a']]])('rejects %j', (raw) => {
    expect(() => parseIdempotencyKey(raw, 255)).toThrow(IdempotencyKeyInvalidError);
  });

  it.each([
    [1.5, 'the number 1.5'],
    [NaN, 'the number NaN'],
    [2 ** 53, 'the number 9007199254740992'],
    [null, 'null'],
    [true, 'a boolean'],
    [{ id: 1 }, 'an object'],
  ])('refuses %p, saying it is %s', (raw, what) => {
    expect(() => parseIdempotencyKey(raw, 255)).toThrow(
      `The idempotency key must be a string or an integer, not ${what}.`,
    );
  });
});
