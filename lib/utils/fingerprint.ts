import { digest } from './key';

/** An object or array being walked, and where the walk is in it. */
interface Frame {
  value: object;
  /** The object cycles are detected by: `value`, or the Map or Set whose items `value` lists. */
  origin: object;
  /** Sorted keys of an object (holding defined values); null for an array. */
  keys: string[] | null;
  next: number;
  /** Whether it is in the set of objects that cycles are detected by. */
  tracked: boolean;
}

/** Every how many levels an object on the path joins the set of objects cycles are found by. */
const CHECKPOINT_EVERY = 64;

/** Whether every item is a string, or every item a number: an order that is the same everywhere. */
function sortable(items: unknown[]): 'string' | 'number' | undefined {
  const type = typeof items[0];
  if (type !== 'string' && type !== 'number') return undefined;
  for (const item of items) {
    // NaN compares with nothing, so it would leave the order to the insertion order.
    if (typeof item !== type || Number.isNaN(item)) return undefined;
  }
  return type;
}

/** `a` before `b` in a sortable list (numbers by value, strings by UTF-16 code units). */
function compare(a: string | number, b: string | number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The items of a Map (key, value, key, value...) or a Set, in a deterministic order where one
 * exists: sorted when every key (Map) or item (Set) is a string, or every one a number, so that
 * insertion order does not matter, as for an object's keys. Otherwise (object keys, mixed types)
 * in insertion order: two Sets with the same objects inserted in another order differ, which
 * errs towards `422`, never towards replaying another payload's response.
 */
function itemsOf(collection: Map<unknown, unknown> | Set<unknown>): unknown[] {
  if (collection instanceof Set) {
    const items = [...collection];
    if (sortable(items)) items.sort((a, b) => compare(a as string, b as string));
    return items;
  }
  const entries = [...collection.entries()];
  if (sortable(entries.map(([key]) => key))) {
    entries.sort(([a], [b]) => compare(a as string, b as string));
  }
  return entries.flat(1);
}

/**
 * A stable hash of a request: its parts (method, URL, pattern...) and a canonical form of its
 * payload. Object keys are sorted, so key order never matters; every value is self-delimiting
 * (type tag, then a length or terminator), so `"1"` and `1` differ and no two payloads share a
 * form; a property holding undefined is the same as no property, as in JSON; Buffers and typed
 * arrays count as their bytes; a Map by its entries and a Set by its items, sorted where every key
 * (item) is a string or every one a number (else in insertion order). Iterative, so a deeply nested hostile body cannot overflow the
 * stack, and cycle-safe (RPC payloads can be object graphs). One frame per object or array and
 * none per primitive, so its cost stays within a few times that of parsing the body; the form is
 * built as one string and hashed once. Throws a RangeError once the form outgrows `maxLength`
 * characters.
 */
export function fingerprint(parts: string[], payload: unknown, maxLength = Infinity): string {
  let out = '';
  for (const part of parts) out += `${part.length}:${part}`;
  const frames: Frame[] = [];
  // Objects on the path being walked, one every CHECKPOINT_EVERY levels: meeting one again is a
  // cycle, which would otherwise loop until the process runs out of memory. A cycle repeats the
  // path, so it reaches such an object again within one turn; adding every level's object (an
  // identity hash each) tripled the cost of a deeply nested body.
  const open = new Set<object>();
  const enter = (value: object, keys: string[] | null, origin = value) => {
    const tracked = frames.length % CHECKPOINT_EVERY === 0;
    if (tracked) open.add(origin);
    frames.push({ value, origin, keys, next: 0, tracked });
  };
  let value = payload;
  for (;;) {
    if (typeof value !== 'object' || value === null) {
      out += primitive(value);
    } else if (open.has(value)) {
      out += 'c';
    } else if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
      const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      out += `b${value.byteLength}:${bytes.toString('base64')}`;
    } else if (value instanceof Map || value instanceof Set) {
      // Tagged apart from arrays and objects; by content: they have no own enumerable keys, so
      // as objects every Map (and every Set) had one form, and a changed payload replayed.
      out += value instanceof Map ? `M${value.size}[` : `S${value.size}[`;
      enter(itemsOf(value), null, value);
    } else if (value instanceof Date) {
      out += `d${Number.isNaN(value.getTime()) ? 'invalid' : value.toISOString()};`;
    } else if (Array.isArray(value)) {
      if (allJsonPrimitives(value)) {
        out += `J${JSON.stringify(value)}`;
      } else {
        out += '[';
        enter(value, null);
      }
    } else {
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record);
      const sorted = isSorted(keys);
      if (!sorted) keys.sort();
      if (isPlain(record) && allJsonValues(record, keys)) {
        out += `J${JSON.stringify(sorted ? record : inOrder(record, keys))}`;
      } else {
        out += '{';
        enter(record, keys);
      }
    }
    // A budget for values nobody bounded (what a route's own function returns, say).
    if (out.length > maxLength) throw new RangeError('the value is too large to fingerprint');
    // The next value to encode, closing every container that has none left.
    let found = false;
    while (!found && frames.length > 0) {
      const frame = frames[frames.length - 1];
      if (frame.keys === null) {
        const array = frame.value as unknown[];
        if (frame.next < array.length) {
          value = array[frame.next++];
          found = true;
          continue;
        }
      } else {
        const record = frame.value as Record<string, unknown>;
        while (frame.next < frame.keys.length) {
          const key = frame.keys[frame.next++];
          if (record[key] === undefined) continue;
          out += `${key.length}:${key}`;
          value = record[key];
          found = true;
          break;
        }
        if (found) continue;
      }
      out += frame.keys === null ? ']' : '}';
      if (frame.tracked) open.delete(frame.origin);
      frames.pop();
    }
    if (!found) break;
  }
  // 132 bits, as for key names (see hash() in key.ts): stored with every record.
  return digest(out);
}

/**
 * Whether JSON encodes `value` as itself (undefined, as an object's property, as no property):
 * arrays of these and plain objects holding only these are encoded by JSON.stringify, natively
 * and many times faster than one value at a time. Which form a container gets depends only on
 * its content, never on key order, so equal payloads always share a form.
 */
function isJsonPrimitive(value: unknown, inObject = false): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'undefined':
      return inObject;
    case 'object':
      return value === null;
    default:
      return false;
  }
}

/** Whether every element (holes included, which JSON would turn into null) is a JSON primitive. */
function allJsonPrimitives(array: unknown[]): boolean {
  for (let i = 0; i < array.length; i++) if (!isJsonPrimitive(array[i])) return false;
  return true;
}

/** A plain object (literal or JSON.parse), whose JSON is its own properties (no toJSON). */
function isPlain(value: object): boolean {
  const prototype = Object.getPrototypeOf(value) as object | null;
  return prototype === Object.prototype || prototype === null;
}

function allJsonValues(record: Record<string, unknown>, keys: string[]): boolean {
  for (const key of keys) if (!isJsonPrimitive(record[key], true)) return false;
  return true;
}

function isSorted(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (keys[i - 1] > keys[i]) return false;
  return true;
}

/** A copy of `record` with its properties in the order of `keys`, as JSON.stringify lists them. */
function inOrder(record: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  // No prototype: a `__proto__` key is then a property like any other, not the prototype setter.
  const ordered = Object.create(null) as Record<string, unknown>;
  for (const key of keys) ordered[key] = record[key];
  return ordered;
}

/** A primitive's self-delimiting form: a tag, then a terminator or a length. */
function primitive(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return `s${value.length}:${value}`;
    case 'number':
      return `#${value};`;
    case 'boolean':
      return value ? 't' : 'f';
    case 'undefined':
      return 'u';
    case 'bigint':
      return `i${value};`;
    case 'object':
      return 'z';
    default: {
      const text = String(value);
      return `?${typeof value}${text.length}:${text}`;
    }
  }
}
