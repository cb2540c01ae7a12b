import { createHash } from 'node:crypto';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';

/** Printable ASCII (space to tilde): what an RFC 8941 sf-string may hold. */
const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * Validates a client's key and unwraps the RFC 8941 sf-string form (`"abc"` is the key `abc`), as
 * the IETF Idempotency-Key draft defines the header. Throws {@link IdempotencyKeyInvalidError}.
 */
export function parseIdempotencyKey(raw: unknown, maxLength: number): string {
  if (Array.isArray(raw)) {
    throw new IdempotencyKeyInvalidError('Send exactly one idempotency key.');
  }
  if (typeof raw !== 'string') {
    throw new IdempotencyKeyInvalidError('The idempotency key must be a string.');
  }
  if (!PRINTABLE.test(raw)) {
    throw new IdempotencyKeyInvalidError(
      'The idempotency key may only contain printable ASCII characters.',
    );
  }
  let key = raw.trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) {
    key = unquote(key);
  }
  if (key.length === 0) {
    throw new IdempotencyKeyInvalidError('The idempotency key must not be empty.');
  }
  if (key.length > maxLength) {
    throw new IdempotencyKeyInvalidError(
      `The idempotency key must be at most ${maxLength} characters long.`,
    );
  }
  return key;
}

/** Unescapes an sf-string body: only `\"` and `\\` are escapes; a bare quote is malformed. */
function unquote(quoted: string): string {
  let out = '';
  for (let i = 1; i < quoted.length - 1; i++) {
    const char = quoted[i];
    if (char === '\\') {
      const next = quoted[++i];
      if (next !== '"' && next !== '\\') {
        throw new IdempotencyKeyInvalidError('The quoted idempotency key has an invalid escape.');
      }
      out += next;
    } else if (char === '"') {
      throw new IdempotencyKeyInvalidError('The quoted idempotency key is malformed.');
    } else {
      out += char;
    }
  }
  return out;
}

/**
 * SHA-256 of the parts, cut to 128 bits and base64url-encoded: 22 characters, safe in a key name.
 * 128 bits keep collisions out of reach (2^64 work even for chosen inputs) at half the bytes.
 */
export function hash(...parts: string[]): string {
  const digest = createHash('sha256');
  for (const part of parts) digest.update(part).update('\0');
  return digest.digest().subarray(0, 16).toString('base64url');
}

/**
 * The store key of a record. The client's key is hashed together with its scope (handler, tenant),
 * so raw client input never reaches a key name and one key used on two endpoints never collides.
 * The hash sits in a `{hash tag}`, so every key of one record maps to one Cluster slot.
 */
export function recordKey(prefix: string, scope: string, key: string): string {
  return `${prefix}{${hash(scope, key)}}`;
}
