/**
 * JSON text for values of a program rather than HTTP bodies: the results of
 * `IdempotencyService.run()`, and what a GraphQL resolver or gRPC method returned (stored rather
 * than what was sent, so that field resolvers, custom scalars such as DateTime and BigInt, or the
 * gRPC serialiser see on a replay what they saw the first time). `Date`, `bigint`, `Buffer`,
 * `Map`, `Set` and `undefined` come back as they went in, where plain JSON would turn them into
 * strings, throw or drop them. They are written as
 * one-key objects `{ "$": tag, "v": value }`; a plain object that itself has a `$` key is wrapped
 * too (`"o"`), so no stored data is ever mistaken for a tag. Decoding goes top down, so a
 * wrapped object's own fields are never read as tags either.
 */

/** A tagged value: `{ $: tag, v: payload }`. */
interface Tagged {
  $: 'd' | 'n' | 'b' | 'u' | 'm' | 's' | 'o';
  v?: unknown;
}

/**
 * Encodes `value` as JSON text (see the file's comment). A `Uint8Array` (a protobuf `bytes` field)
 * comes back as a Buffer. Throws a TypeError for what is not data: a cycle, a function, a symbol,
 * another typed array or a DataView.
 */
export function encodeValue(value: unknown): string {
  return JSON.stringify(plainJson(value, 0) ? value : toJson(value, new Set()));
}

/**
 * Whether `value` is JSON as it is: nothing to tag, no `toJSON()` to call, nothing to refuse,
 * so that JSON.stringify writes what it would write of {@link toJson}'s copy. Plain objects
 * (their prototype `Object.prototype` or none) and arrays, at most 32 deep (deeper, or a cycle:
 * the full path, which refuses a cycle).
 */
function plainJson(value: unknown, depth: number): boolean {
  if (value === null) return true;
  const type = typeof value;
  if (type === 'string' || type === 'number' || type === 'boolean') return true;
  if (type !== 'object' || depth > 32) return false;
  if (Array.isArray(value)) {
    // An item holding undefined is tagged (JSON would write null).
    return value.every((item) => item !== undefined && plainJson(item, depth + 1));
  }
  const prototype = Reflect.getPrototypeOf(value as object);
  if (
    (prototype !== Object.prototype && prototype !== null) ||
    Object.hasOwn(value as object, '$')
  ) {
    return false;
  }
  // As in JSON, a field holding undefined is no field.
  for (const field of Object.values(value as object)) {
    if (field !== undefined && !plainJson(field, depth + 1)) return false;
  }
  return true;
}

/**
 * The value {@link encodeValue} was given. Throws on text it did not write. Plain JSON (no
 * object with a `$` key: nothing was tagged) is JSON.parse's value as it is, which holds every
 * field as its own property, `__proto__` too.
 */
export function decodeValue(text: string): unknown {
  const json: unknown = JSON.parse(text);
  return untagged(json) ? json : fromJson(json);
}

/** Whether no object in `json` has a `$` key: then nothing in it is a tag. */
function untagged(json: unknown): boolean {
  if (json === null || typeof json !== 'object') return true;
  if (Array.isArray(json)) return json.every(untagged);
  if (Object.hasOwn(json, '$')) return false;
  // Own fields only, as fromJson reads them: never what a polluted prototype holds.
  return Object.values(json).every(untagged);
}

function toJson(value: unknown, path: Set<object>): unknown {
  if (value === undefined) return { $: 'u' };
  if (typeof value === 'bigint') return { $: 'n', v: value.toString() };
  if (typeof value === 'symbol' || typeof value === 'function') {
    throw new TypeError(`a ${typeof value} cannot be stored`);
  }
  if (value === null || typeof value !== 'object') return value;
  // An invalid Date's time is NaN, which JSON writes as null.
  if (value instanceof Date) return { $: 'd', v: value.getTime() };
  if (value instanceof Uint8Array) {
    return {
      $: 'b',
      v: Buffer.from(value.buffer, value.byteOffset, value.length).toString('base64'),
    };
  }
  // Other views as JSON would be objects of indexes, which would replay as no typed array.
  if (ArrayBuffer.isView(value)) {
    throw new TypeError(`a ${value.constructor.name} cannot be stored`);
  }
  if (path.has(value)) throw new TypeError('a value with a cycle cannot be stored');
  path.add(value);
  try {
    if (Array.isArray(value)) return value.map((item) => toJson(item, path));
    if (value instanceof Map) {
      return { $: 'm', v: [...value].map(([k, v]) => [toJson(k, path), toJson(v, path)]) };
    }
    if (value instanceof Set) return { $: 's', v: [...value].map((item) => toJson(item, path)) };
    // Any other object as JSON would see it: its toJSON() (a Decimal), else its own fields.
    const json = (value as { toJSON?: () => unknown }).toJSON;
    if (typeof json === 'function') return toJson(json.call(value), path);
    const fields: Record<string, unknown> = {};
    for (const [name, field] of Object.entries(value)) {
      // As in JSON, a field holding undefined is no field.
      if (field !== undefined) define(fields, name, toJson(field, path));
    }
    return Object.hasOwn(fields, '$') ? { $: 'o', v: fields } : fields;
  } finally {
    path.delete(value);
  }
}

function fromJson(json: unknown): unknown {
  if (json === null || typeof json !== 'object') return json;
  if (Array.isArray(json)) return json.map(fromJson);
  const record = json as Record<string, unknown>;
  if (!Object.hasOwn(record, '$')) return fields(record);
  const { $: tag, v } = record as unknown as Tagged;
  switch (tag) {
    case 'u':
      return undefined;
    case 'n':
      return BigInt(v as string);
    case 'd':
      return new Date((v as number | null) ?? NaN);
    case 'b':
      return Buffer.from(v as string, 'base64');
    case 'm':
      return new Map((v as [unknown, unknown][]).map(([k, item]) => [fromJson(k), fromJson(item)]));
    case 's':
      return new Set((v as unknown[]).map(fromJson));
    case 'o':
      return fields(v as Record<string, unknown>);
    default:
      throw new TypeError(`unknown stored value tag ${JSON.stringify(tag)}`);
  }
}

/** A plain object's fields decoded. `__proto__` stays a field, as JSON.parse leaves it. */
function fields(record: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(record)) define(out, name, fromJson(field));
  return out;
}

/**
 * Sets a field. `__proto__` is defined, since an assignment would change the prototype instead;
 * every other name is assigned, which is several times cheaper than defining it.
 */
function define(target: Record<string, unknown>, name: string, value: unknown): void {
  if (name !== '__proto__') {
    target[name] = value;
    return;
  }
  Object.defineProperty(target, name, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}
