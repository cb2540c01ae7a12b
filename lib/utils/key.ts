import { hash as sha256 } from 'node:crypto';
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
 * SHA-256 of the parts in base64url, cut to 22 characters (132 bits): short and safe in a key
 * name, and collisions stay out of reach (2^66 work even for chosen inputs).
 */
export function hash(...parts: string[]): string {
  // One-shot hashing is several times faster than createHash() for inputs this small.
  return sha256('sha256', parts.join('\0') + '\0', 'base64url').slice(0, 22);
}

/**
 * The store key of a record. The client's key is hashed together with its scope (handler, tenant),
 * so raw client input never reaches a key name and one key used on two endpoints never collides.
 * The hash sits in a `{hash tag}`, so every key of one record maps to one Cluster slot.
 */
export function recordKey(prefix: string, scope: string, key: string): string {
  return `${prefix}{${hash(scope, key)}}`;
}
