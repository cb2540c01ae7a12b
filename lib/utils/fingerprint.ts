import { createHash } from 'node:crypto';

/**
 * Feeds a canonical form of `value` into the hash: object keys sorted, so key order never matters,
 * and type tags so that `"1"` and `1` differ. Buffers and typed arrays are hashed as bytes.
 */
function feed(digest: ReturnType<typeof createHash>, value: unknown): void {
  if (value === null || value === undefined) {
    digest.update(value === null ? 'n' : 'u');
  } else if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
    digest.update(`b${value.byteLength}:`).update(value);
  } else if (Array.isArray(value)) {
    digest.update(`a${value.length}[`);
    for (const item of value) feed(digest, item);
    digest.update(']');
  } else if (value instanceof Date) {
    digest.update(`d${value.toISOString()}`);
  } else if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    // Like JSON: a property holding undefined is the same as no property.
    const keys = Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort();
    digest.update(`o${keys.length}{`);
    for (const key of keys) {
      digest.update(`${key.length}:${key}`);
      feed(digest, record[key]);
    }
    digest.update('}');
  } else {
    const text = String(value);
    digest.update(`${typeof value}${text.length}:${text}`);
  }
}

/**
 * A stable hash of a request: its parts (method, URL, pattern...) and a canonical form of its
 * payload. Equal JSON payloads hash equal whatever their key order.
 */
export function fingerprint(parts: string[], payload: unknown): string {
  const digest = createHash('sha256');
  for (const part of parts) digest.update(`${part.length}:${part}`);
  feed(digest, payload);
  return digest.digest('base64url');
}
