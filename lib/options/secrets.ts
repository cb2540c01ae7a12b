import { nestedNamesProblem } from './known-names';
import { obviousWeakness } from './secret-strength';

/** Bytes of an AES-256 key: a Buffer in `encryption.keys` is used as the key itself. */
export const ENCRYPTION_KEY_BYTES = 32;

/** Shortest secret string taken as an encryption key (HKDF cannot add entropy a short one lacks). */
const MIN_ENCRYPTION_SECRET_CHARS = 32;

/** Shortest `keyDerivationSecret`, in bytes: HMAC-SHA-256 gains nothing from more than 32. */
export const MIN_DERIVATION_SECRET_BYTES = 32;

/** How to make a secret, for messages that refuse one. */
const GENERATE = 'generate one with `openssl rand -base64 32` (or crypto.randomBytes(32))';

/**
 * Why the `encryption` module option is not usable, or undefined when it is (checked at boot):
 * `{ keys }` with at least one key, each a 32-byte Buffer or a string of 32 characters or more,
 * and none obviously not secret (see {@link obviousWeakness}).
 */
export function checkEncryptionOption(encryption: unknown): string | undefined {
  const keys = (encryption as { keys?: unknown } | null)?.keys;
  const misnamed = nestedNamesProblem('encryption', encryption);
  if (misnamed) {
    return `${misnamed}; rotate keys by prepending the new one: { keys: [current, ...previous] }`;
  }
  if (typeof encryption !== 'object' || encryption === null || !Array.isArray(keys)) {
    return 'encryption must be { keys: [currentKey, ...previousKeys] }';
  }
  if (keys.length === 0) {
    return 'encryption.keys is empty: give at least one key (the first seals new records)';
  }
  for (const [i, key] of keys.entries()) {
    if (Buffer.isBuffer(key)) {
      if (key.length !== ENCRYPTION_KEY_BYTES) {
        return `encryption.keys[${i}] is a Buffer of ${key.length} bytes; AES-256 needs exactly ${ENCRYPTION_KEY_BYTES} (crypto.randomBytes(32))`;
      }
    } else if (typeof key === 'string') {
      if (key.length < MIN_ENCRYPTION_SECRET_CHARS) {
        return `encryption.keys[${i}] is a string of ${key.length} characters; use at least ${MIN_ENCRYPTION_SECRET_CHARS} (openssl rand -base64 32)`;
      }
    } else {
      return `encryption.keys[${i}] must be a 32-byte Buffer or a string of at least ${MIN_ENCRYPTION_SECRET_CHARS} characters, got ${typeof key}`;
    }
    // Would seal every record with a key anyone can guess.
    const weakness = obviousWeakness(key);
    if (weakness) return `encryption.keys[${i}] is not secret: ${weakness}; ${GENERATE}`;
  }
  return undefined;
}

/**
 * Why `secret` cannot be a key derivation secret (`keyDerivationSecret`), or undefined when it
 * can: a string or Buffer of at least {@link MIN_DERIVATION_SECRET_BYTES} bytes, not obviously
 * not secret (see {@link obviousWeakness}).
 */
export function secretProblem(secret: unknown): string | undefined {
  if (typeof secret !== 'string' && !Buffer.isBuffer(secret)) {
    return `keyDerivationSecret must be a string or a Buffer, got ${typeof secret}`;
  }
  const bytes = typeof secret === 'string' ? Buffer.byteLength(secret) : secret.length;
  if (bytes < MIN_DERIVATION_SECRET_BYTES) {
    return (
      `keyDerivationSecret must be at least ${MIN_DERIVATION_SECRET_BYTES} bytes (got ${bytes}): ` +
      'e.g. 32 random bytes in base64 (openssl rand -base64 32), kept with your other secrets'
    );
  }
  // Would let anyone who knows a client's key compute the keys derived from it.
  const weakness = obviousWeakness(secret);
  if (weakness) return `keyDerivationSecret is not secret: ${weakness}; ${GENERATE}`;
  return undefined;
}
