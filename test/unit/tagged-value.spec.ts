import { decodeTagged, encodeTagged } from '../../lib/utils/tagged-value';

/** Through JSON, as a store keeps it. */
const roundTrip = (value: unknown) =>
  decodeTagged(JSON.parse(JSON.stringify(encodeTagged(value))) as ReturnType<typeof encodeTagged>);

describe('what GraphQL and gRPC replays store of a return value', () => {
  it('brings back Dates, bigints, Buffers and undefined in arrays', () => {
    const value = {
      at: new Date('2026-01-02T03:04:05.678Z'),
      cents: 2n ** 64n,
      bytes: Buffer.from([0, 1, 255]),
      list: [1, undefined, { when: new Date(0), big: -1n }],
      nested: { name: 'x', none: null },
    };
    expect(roundTrip(value)).toEqual(value);
    expect(roundTrip(new Date(5))).toEqual(new Date(5));
    expect(roundTrip(undefined)).toBeUndefined();
    expect(roundTrip(null)).toBeNull();
    expect(roundTrip(7n)).toBe(7n);
  });

  it('keeps own fields of class instances, drops undefined fields as JSON does', () => {
    class Order {
      constructor(
        readonly id: string,
        readonly note?: string,
      ) {}
      get label() {
        return `order ${this.id}`;
      }
    }
    expect(roundTrip(new Order('1'))).toEqual({ id: '1' });
  });

  it('keeps a field named __proto__ a field', () => {
    const value = JSON.parse('{"__proto__": {"at": 1}}') as Record<string, unknown>;
    (value['__proto__'] as Record<string, unknown>).at = new Date(1);
    const back = roundTrip(value) as Record<string, unknown>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.hasOwn(back, '__proto__')).toBe(true);
    expect((back['__proto__'] as { at: unknown }).at).toEqual(new Date(1));
  });

  it('refuses what is not data: functions, symbols, cycles, Maps', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => encodeTagged({ f: () => 1 })).toThrow(TypeError);
    expect(() => encodeTagged({ s: Symbol('x') })).toThrow(TypeError);
    expect(() => encodeTagged(cycle)).toThrow(TypeError);
    expect(() => encodeTagged(new Map())).toThrow(TypeError);
  });

  it('lets one object appear twice (not a cycle)', () => {
    const shared = { at: new Date(2) };
    expect(roundTrip({ a: shared, b: shared })).toEqual({ a: shared, b: shared });
  });
});
