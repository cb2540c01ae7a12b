/**
 * A handler's return value as JSON that comes back as the same value: the GraphQL and gRPC
 * adapters store what a resolver or method returned, not what was sent, so that field resolvers
 * and custom scalars (DateTime, BigInt) below a replayed field, or the gRPC serialiser, see what
 * they saw the first time. JSON alone would turn a Date into a string and fail on a bigint.
 */

/** Kinds of value JSON cannot carry back: `d` Date, `n` bigint, `b` Buffer, `u` undefined. */
type Tag = 'd' | 'n' | 'b' | 'u';

/** A value as stored: `v` JSON, `t` the paths (property names / indexes) of tagged values. */
export interface TaggedValue {
  v: unknown;
  t?: [(string | number)[], Tag][];
}

/** How deep a returned value may nest before it is refused as not storable. */
const MAX_DEPTH = 256;

/**
 * `value` as {@link TaggedValue}. Objects keep their own enumerable fields (a class instance's
 * methods and prototype getters are not stored); Dates, bigints and Buffers are tagged, and so
 * is undefined in an array (JSON drops it elsewhere, as GraphQL and protobuf do). Throws a
 * TypeError for what cannot be stored as data (functions, symbols, cycles, Maps...).
 */
export function encodeTagged(value: unknown): TaggedValue {
  const tags: [(string | number)[], Tag][] = [];
  const seen = new Set<object>();
  const walk = (item: unknown, path: (string | number)[]): unknown => {
    switch (typeof item) {
      case 'bigint':
        tags.push([path, 'n']);
        return item.toString();
      case 'function':
      case 'symbol':
        throw new TypeError(`a ${typeof item} at ${path.join('.') || 'the top'}`);
      case 'object':
        break;
      default:
        return item;
    }
    if (item === null) return null;
    if (item instanceof Date) {
      tags.push([path, 'd']);
      return Number.isNaN(item.getTime()) ? null : item.toISOString();
    }
    if (Buffer.isBuffer(item)) {
      tags.push([path, 'b']);
      return item.toString('base64');
    }
    if (seen.has(item) || path.length > MAX_DEPTH) {
      throw new TypeError(`a cycle or too deep a value at ${path.join('.')}`);
    }
    if (item instanceof Map || item instanceof Set || ArrayBuffer.isView(item)) {
      throw new TypeError(`a ${item.constructor.name} at ${path.join('.') || 'the top'}`);
    }
    seen.add(item);
    let out: unknown;
    if (Array.isArray(item)) {
      out = item.map((element, index) => {
        if (element !== undefined) return walk(element, [...path, index]);
        tags.push([[...path, index], 'u']);
        return null;
      });
    } else {
      const copy: Record<string, unknown> = {};
      for (const [name, field] of Object.entries(item)) {
        // defineProperty: a field named `__proto__` (a JSON scalar may echo one) stays a field.
        if (field !== undefined) define(copy, name, walk(field, [...path, name]));
      }
      out = copy;
    }
    seen.delete(item);
    return out;
  };
  const v = value === undefined ? null : walk(value, []);
  if (value === undefined) tags.push([[], 'u']);
  return tags.length > 0 ? { v, t: tags } : { v };
}

/** The value {@link encodeTagged} stored, rebuilt. */
export function decodeTagged(stored: TaggedValue): unknown {
  let root = stored.v;
  for (const [path, tag] of stored.t ?? []) {
    const revive = (raw: unknown): unknown =>
      tag === 'd'
        ? raw === null
          ? new Date(NaN)
          : new Date(raw as string)
        : tag === 'n'
          ? BigInt(raw as string)
          : tag === 'b'
            ? Buffer.from(raw as string, 'base64')
            : undefined;
    if (path.length === 0) {
      root = revive(root);
      continue;
    }
    let parent = root as Record<string | number, unknown>;
    for (const step of path.slice(0, -1)) parent = parent[step] as Record<string | number, unknown>;
    const last = path[path.length - 1];
    define(parent, last, revive(parent[last]));
  }
  return root;
}

function define(target: object, name: string | number, value: unknown): void {
  Object.defineProperty(target, name, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}
