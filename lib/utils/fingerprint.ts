import { createHash } from 'node:crypto';

/** Text fed to the hash as is: structure markers and object keys, never a payload value. */
class Literal {
  constructor(
    readonly text: string,
    /** The object or array this marker closes. */
    readonly closes?: object,
  ) {}
}

/**
 * A stable hash of a request: its parts (method, URL, pattern...) and a canonical form of its
 * payload. Object keys are sorted, so key order never matters; values carry type tags, so `"1"`
 * and `1` differ; a property holding undefined is the same as no property, as in JSON; Buffers
 * and typed arrays are hashed as bytes. Iterative, so a deeply nested hostile body cannot
 * overflow the stack, and cycle-safe.
 */
export function fingerprint(parts: string[], payload: unknown): string {
  const digest = createHash('sha256');
  for (const part of parts) digest.update(`${part.length}:${part}`);
  const stack: unknown[] = [payload];
  // Objects being walked: meeting one again is a cycle (RPC payloads can hold them), which would
  // otherwise loop until the process runs out of memory.
  const open = new Set<object>();
  while (stack.length > 0) {
    const value = stack.pop();
    if (value instanceof Literal) {
      digest.update(value.text);
      if (value.closes) open.delete(value.closes);
    } else if (typeof value === 'object' && value !== null && open.has(value)) {
      digest.update('cycle');
    } else if (value === null || value === undefined) {
      digest.update(value === null ? 'n' : 'u');
    } else if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
      digest.update(`b${value.byteLength}:`).update(value);
    } else if (Array.isArray(value)) {
      digest.update(`a${value.length}[`);
      open.add(value);
      stack.push(new Literal(']', value));
      for (let i = value.length - 1; i >= 0; i--) stack.push(value[i]);
    } else if (value instanceof Date) {
      digest.update(`d${value.toISOString()}`);
    } else if (typeof value === 'object') {
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort();
      digest.update(`o${keys.length}{`);
      open.add(record);
      stack.push(new Literal('}', record));
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push(record[keys[i]], new Literal(`${keys[i].length}:${keys[i]}`));
      }
    } else {
      const text = String(value);
      digest.update(`${typeof value}${text.length}:${text}`);
    }
  }
  // 128 bits, as for key names (see hash() in key.ts): stored with every record.
  return digest.digest().subarray(0, 16).toString('base64url');
}
