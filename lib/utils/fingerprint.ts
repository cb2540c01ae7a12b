import { hash } from 'node:crypto';

/** Text added to the canonical form as is: structure markers and object keys. */
class Literal {
  constructor(
    readonly text: string,
    /** The object or array this marker closes. */
    readonly closes?: object,
  ) {}
}

/**
 * A stable hash of a request: its parts (method, URL, pattern...) and a canonical form of its
 * payload. Object keys are sorted, so key order never matters; values carry type tags and lengths,
 * so `"1"` and `1` differ and no two payloads share a form; a property holding undefined is the
 * same as no property, as in JSON; Buffers and typed arrays count as their bytes. Iterative, so a
 * deeply nested hostile body cannot overflow the stack, and cycle-safe. The form is built as one
 * string and hashed once (one-shot SHA-256 is much cheaper than many digest updates).
 */
export function fingerprint(parts: string[], payload: unknown): string {
  const out: string[] = [];
  for (const part of parts) out.push(`${part.length}:${part}`);
  const stack: unknown[] = [payload];
  // Objects being walked: meeting one again is a cycle (RPC payloads can hold them), which would
  // otherwise loop until the process runs out of memory.
  const open = new Set<object>();
  while (stack.length > 0) {
    const value = stack.pop();
    if (value instanceof Literal) {
      out.push(value.text);
      if (value.closes) open.delete(value.closes);
    } else if (typeof value === 'object' && value !== null && open.has(value)) {
      out.push('cycle');
    } else if (value === null || value === undefined) {
      out.push(value === null ? 'n' : 'u');
    } else if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
      const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      out.push(`b${value.byteLength}:${bytes.toString('base64')}`);
    } else if (Array.isArray(value)) {
      out.push(`a${value.length}[`);
      open.add(value);
      stack.push(new Literal(']', value));
      for (let i = value.length - 1; i >= 0; i--) stack.push(value[i]);
    } else if (value instanceof Date) {
      out.push(`d${value.toISOString()}`);
    } else if (typeof value === 'object') {
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort();
      out.push(`o${keys.length}{`);
      open.add(record);
      stack.push(new Literal('}', record));
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push(record[keys[i]], new Literal(`${keys[i].length}:${keys[i]}`));
      }
    } else {
      const text = String(value);
      out.push(`${typeof value}${text.length}:${text}`);
    }
  }
  // 132 bits, as for key names (see hash() in key.ts): stored with every record.
  return hash('sha256', out.join(''), 'base64url').slice(0, 22);
}
