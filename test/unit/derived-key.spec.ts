import { createHash, randomBytes } from 'node:crypto';
import { derivedIdempotencyKey, tryDerivedIdempotencyKey } from '../../lib';
import { resolveModuleOptions } from '../../lib/options';
import { deriveKey, inClaimContext, propagatedKey } from '../../lib/propagation/derived-key';
import { recordKey } from '../../lib/core/record-key';
import { digest } from '../../lib/utils/key';

const SECRET = 'a-test-secret-of-at-least-32-bytes!!';
const record = recordKey('idempotency:', 'POST /payments\0u:42', 'client-key-1');
const inClaim = <T>(fn: () => T, key = record, secret: string | Buffer = SECRET) =>
  inClaimContext(key, { keyDerivationSecret: secret, propagateKeys: true }, fn);

describe('derivedIdempotencyKey', () => {
  it('is stable: the same record, label and secret give the same key in every run', () => {
    const first = inClaim(() => derivedIdempotencyKey('charge'));
    const rerun = inClaim(() => derivedIdempotencyKey('charge'));
    expect(rerun).toBe(first);
    expect(first).toBe(deriveKey(SECRET, record, 'charge'));
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/); // a bare Idempotency-Key, 256 bits
  });

  it('differs per request, scope, route, label and secret', () => {
    const keys = [
      inClaim(() => derivedIdempotencyKey('charge')),
      inClaim(() => derivedIdempotencyKey('refund')),
      inClaim(
        () => derivedIdempotencyKey('charge'),
        recordKey('idempotency:', 'POST /payments\0u:42', 'client-key-2'),
      ),
      inClaim(
        () => derivedIdempotencyKey('charge'),
        recordKey('idempotency:', 'POST /payments\0u:43', 'client-key-1'),
      ),
      inClaim(
        () => derivedIdempotencyKey('charge'),
        recordKey('idempotency:', 'POST /orders\0u:42', 'client-key-1'),
      ),
      inClaim(
        () => derivedIdempotencyKey('charge'),
        record,
        'another-app-secret-of-32-bytes-or-more',
      ),
      inClaim(() => derivedIdempotencyKey('charge'), record, Buffer.alloc(32, 7)),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('reveals nothing of the client key: neither it nor its hashes appear, and a guess does not verify without the secret', () => {
    const clientKey = 'client-key-1';
    const key = inClaim(() => derivedIdempotencyKey('charge'));
    const visible = [
      clientKey,
      digest(`POST /payments\0u:42\0${clientKey}\0`),
      record,
      createHash('sha256').update(clientKey).digest('base64url'),
    ];
    for (const text of visible) expect(key).not.toContain(text);
    // Whoever sees the key (the provider) cannot test a guessed client key without the secret.
    expect(deriveKey('a-guessed-secret-of-32-bytes-or-more!', record, 'charge')).not.toBe(key);
  });

  it('throws outside a claimed handler; the try variant answers undefined', () => {
    expect(() => derivedIdempotencyKey('charge')).toThrow(/only available inside a claimed/);
    expect(tryDerivedIdempotencyKey('charge')).toBeUndefined();
    expect(inClaim(() => tryDerivedIdempotencyKey('charge'))).toBe(
      inClaim(() => derivedIdempotencyKey('charge')),
    );
  });

  it('throws without a keyDerivationSecret, in both variants (a configuration error)', () => {
    const run = (fn: () => unknown) => inClaimContext(record, {}, fn);
    expect(() => run(() => derivedIdempotencyKey('charge'))).toThrow(/keyDerivationSecret/);
    expect(() => run(() => tryDerivedIdempotencyKey('charge'))).toThrow(/keyDerivationSecret/);
  });

  it('follows the handler through awaits and timers, and stays apart between concurrent runs', async () => {
    const later = (label: string) =>
      new Promise<string>((resolve) => setTimeout(() => resolve(derivedIdempotencyKey(label)), 1));
    const other = recordKey('idempotency:', 'POST /payments\0u:42', 'client-key-2');
    const [a, b] = await Promise.all([
      inClaim(async () => {
        await Promise.resolve();
        return later('charge');
      }),
      inClaim(() => later('charge'), other),
    ]);
    expect(a).toBe(deriveKey(SECRET, record, 'charge'));
    expect(b).toBe(deriveKey(SECRET, other, 'charge'));
  });
});

describe('propagated keys', () => {
  it('give the nth call to one endpoint its own key, the same in every re-run', () => {
    const run = () => inClaim(() => ['POST a', 'POST b', 'POST a', 'POST a'].map(propagatedKey));
    const first = run();
    expect(run()).toEqual(first);
    expect(first).toEqual([
      deriveKey(SECRET, record, 'POST a'),
      deriveKey(SECRET, record, 'POST b'),
      deriveKey(SECRET, record, 'POST a #2'),
      deriveKey(SECRET, record, 'POST a #3'),
    ]);
  });

  it('are none outside a propagating handler', () => {
    expect(propagatedKey('POST a')).toBeUndefined();
    const quiet = inClaimContext(record, { keyDerivationSecret: SECRET }, () => propagatedKey('x'));
    expect(quiet).toBeUndefined();
  });
});

describe('keyDerivationSecret validation', () => {
  it.each([
    ['a short string', 'too-short', /at least 32 bytes \(got 9\)/],
    ['a short Buffer', Buffer.alloc(16), /at least 32 bytes \(got 16\)/],
    ['a number', 42, /string or a Buffer, got number/],
  ])('refuses %s at boot', (_name, secret, message) => {
    expect(() => resolveModuleOptions({ keyDerivationSecret: secret as string })).toThrow(message);
  });

  it('accepts 32 bytes, and propagateKeys only as a boolean', () => {
    expect(() => resolveModuleOptions({ keyDerivationSecret: randomBytes(32) })).not.toThrow();
    expect(() => resolveModuleOptions({ propagateKeys: 'yes' as never })).toThrow(
      /propagateKeys must be a boolean/,
    );
  });
});
