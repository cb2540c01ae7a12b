import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { resolveModuleOptions } from '../../lib/options';
import { obviousWeakness } from '../../lib/options/secret-strength';

/**
 * An encryption key or derivation secret that is obviously not secret (a placeholder, zeros,
 * a pattern) seals every record, or derives every key, with a value anyone can guess: it fails
 * boot, saying how to make one. No key from a random source may ever be refused.
 */

const bytes = (values: number[]) => Buffer.from(values);

/** Secrets of the right length that are obviously not secret, with why. */
const DEGENERATE: [string, string | Buffer, RegExp][] = [
  ['32 spaces', ' '.repeat(32), /whitespace only/],
  ['mixed whitespace', ' \t\n\r'.repeat(8), /whitespace only/],
  ['32 zero bytes', Buffer.alloc(32), /one byte repeated/],
  ['32 bytes of 0xff', Buffer.alloc(32, 0xff), /one byte repeated/],
  ['one character', 'x'.repeat(32), /one character repeated/],
  ['zeros in hex', '00'.repeat(32), /one character repeated/],
  ['a word repeated', 'changeme'.repeat(4), /repeats a pattern of 8 characters/],
  ['two characters alternating', 'ab'.repeat(16), /repeats a pattern of 2 characters/],
  ['digits repeated, not a whole number of times', '0123456789'.repeat(4), /pattern of 10/],
  ['a pattern of bytes', Buffer.alloc(32, 'dead', 'hex'), /repeats a pattern of 2 bytes/],
  ['one character apart', 'a'.repeat(31) + 'b', /too little variety/],
  ['zeros and a short tail', '0'.repeat(28) + '1234', /too little variety/],
  ['the alphabet', 'abcdefghijklmnopqrstuvwxyzABCDEF', /too little variety/],
  ['bytes 0 to 31', bytes(Array.from({ length: 32 }, (_, i) => i)), /too little variety/],
  [
    'bytes counting down through 0',
    bytes(Array.from({ length: 32 }, (_, i) => (16 - i) & 255)),
    /too little variety/,
  ],
];

/** Keys from a random source, in the forms people write them. */
const RANDOM: [string, () => string | Buffer][] = [
  ['32 bytes in hex', () => randomBytes(32).toString('hex')],
  ['16 bytes in hex (32 characters)', () => randomBytes(16).toString('hex')],
  ['32 bytes in base64 (openssl rand -base64 32)', () => randomBytes(32).toString('base64')],
  ['24 bytes in base64 (32 characters)', () => randomBytes(24).toString('base64')],
  ['32 bytes in base64url', () => randomBytes(32).toString('base64url')],
  ['32 raw bytes', () => randomBytes(32)],
  ['32 decimal digits', () => Array.from({ length: 32 }, () => randomInt(10)).join('')],
  ['two UUIDs', () => randomUUID() + randomUUID()],
];

describe('secrets that are obviously not secret', () => {
  it.each(DEGENERATE)('%s: refused as an encryption key', (_name, key, reason) => {
    expect(obviousWeakness(key)).toMatch(reason);
    expect(() => resolveModuleOptions({ encryption: { keys: [randomBytes(32), key] } })).toThrow(
      new RegExp(
        `^IdempotencyModule: encryption.keys\\[1\\] is not secret: .*${reason.source}.*; ` +
          'generate one with `openssl rand -base64 32`',
      ),
    );
  });

  it.each(DEGENERATE)('%s: refused as a keyDerivationSecret', (_name, secret, reason) => {
    expect(() => resolveModuleOptions({ keyDerivationSecret: secret })).toThrow(
      new RegExp(`^IdempotencyModule: keyDerivationSecret is not secret: .*${reason.source}`),
    );
  });

  it('never names what the secret holds (the message reaches logs)', () => {
    const secret = 'hunter2-'.repeat(4);
    expect(() => resolveModuleOptions({ keyDerivationSecret: secret })).toThrow(
      /^(?!.*hunter2).*repeats a pattern of 8 characters/,
    );
  });
});

describe('secrets from a random source', () => {
  // The thresholds leave a margin of over 25 bits to the lowest of a million keys of each form
  // (see MIN_ESTIMATED_BITS); a few thousand here would catch a threshold moved into the range.
  it.each(RANDOM)('%s: 2,000 of them are all accepted', (_name, make) => {
    const refused: string[] = [];
    for (let i = 0; i < 2_000; i++) {
      const key = make();
      const reason = obviousWeakness(key);
      if (reason) refused.push(`${key.toString('hex')}: ${reason}`);
    }
    expect(refused).toEqual([]);
  });

  it('accepts the secrets the docs and tests write by hand', () => {
    for (const secret of [
      'a secret string of at least thirty-two characters',
      'a-test-secret-of-at-least-32-bytes!!',
      'propagated-keys-e2e-secret-0123456789abcdef',
    ]) {
      expect(obviousWeakness(secret)).toBeUndefined();
    }
  });

  it('boots with random keys in every form', () => {
    const keys = RANDOM.map(([, make]) => make());
    expect(() =>
      resolveModuleOptions({ encryption: { keys }, keyDerivationSecret: randomBytes(32) }),
    ).not.toThrow();
  });
});
