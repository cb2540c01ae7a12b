import { randomBytes } from 'node:crypto';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';
import { digest } from '../utils/key';

/** What every run() record's scope starts with: no HTTP route or message handler's can. */
export const RUN_SPACE = 'run:';

/**
 * A `run()` key as text: a non-empty string of at most `maxLength` characters (any text: it is
 * hashed with its scope), or an integer as its decimal form. Throws IdempotencyKeyInvalidError.
 */
export function runKeyText(key: unknown, maxLength: number): string {
  if ((typeof key === 'number' && Number.isSafeInteger(key)) || typeof key === 'bigint') {
    return String(key);
  }
  if (typeof key !== 'string' || key === '' || key.length > maxLength) {
    throw new IdempotencyKeyInvalidError(
      `The idempotency key must be a string of 1 to ${maxLength} characters or an integer.`,
    );
  }
  return key;
}

/**
 * What a record is scoped to, beside the client's key: the route's identity (or its key space),
 * then the record's owner: the tenant a `scope` function returned (`tenantId`), else the
 * principal's id (`principalId`), else nobody (every caller of the route shares it). The route's
 * identity holds no NUL and the owner comes last, so the text names one route and one owner.
 */
export function recordScope(
  route: string,
  tenant: string | undefined,
  principal: string | undefined,
): string {
  if (tenant !== undefined) return `${route}\0t:${tenant}`;
  return principal === undefined ? route : `${route}\0u:${principal}`;
}

/**
 * The store key of a record: the only place one is built (routes, `run()`, operators). The
 * client's key is hashed together with its scope, so raw client input never reaches a key name
 * and one key used on two endpoints never collides. The hash sits in a `{hash tag}`, so every key
 * of one record maps to one Cluster slot.
 *
 * The hashed text must name one scope and one key only. `<scope>\0<key>\0`, as every release so
 * far has hashed it, does while the key holds no NUL: the key is then what follows the last NUL
 * but one, whatever the scope holds. Route keys are printable ASCII, so their records keep their
 * keys across upgrades. A key that holds a NUL (a `run()` key is any text) would make it
 * ambiguous (`'a\0b'` + `'c'` against `'a'` + `'b\0c'`): the pair is then written as JSON after
 * a leading NUL. JSON escapes NUL, so that text holds one NUL, where the other form holds two or
 * more.
 */
export function recordKey(prefix: string, scope: string, key: string): string {
  const text = key.includes('\0') ? `\0${JSON.stringify([scope, key])}` : `${scope}\0${key}\0`;
  return `${prefix}{${digest(text)}}`;
}

/** This process's part of every owner token: 96 random bits. */
const TOKEN_PREFIX = randomBytes(12).toString('base64url');
let tokens = 0;

/**
 * A new owner token: this process's random prefix and a counter, so tokens are unique across
 * processes and restarts without a random draw per request. A token fences a claim; it is never
 * sent to a client.
 */
export function ownerToken(): string {
  return TOKEN_PREFIX + (++tokens).toString(36);
}
