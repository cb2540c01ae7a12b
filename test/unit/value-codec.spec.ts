import { decodeValue, encodeValue } from '../../lib/utils/value-codec';

const roundTrip = (value: unknown) => decodeValue(encodeValue(value));

describe('what run(), GraphQL and gRPC replays store of a value', () => {
  it('gives back Date, bigint, Buffer, Map, Set and undefined as they went in', () => {
    const value = {
      at: new Date('2026-11-25T18:00:00.123Z'),
      amount: 12345678901234567890n,
      pdf: Buffer.from([0, 1, 254, 255]),
      byId: new Map<unknown, unknown>([[1n, new Date(0)]]),
      tags: new Set(['a', 'b']),
      list: [undefined, null, 1, 'x'],
    };
    const back = roundTrip(value) as typeof value;
    expect(back).toEqual(value);
    expect(back.at).toBeInstanceOf(Date);
    expect(typeof back.amount).toBe('bigint');
    expect(Buffer.isBuffer(back.pdf)).toBe(true);
    expect(back.list).toHaveLength(4);
  });

  it('brings back Dates, bigints, Buffers and undefined nested in arrays', () => {
    const value = {
      at: new Date('2026-01-02T03:04:05.678Z'),
      cents: 2n ** 64n,
      bytes: Buffer.from([0, 1, 255]),
      list: [1, undefined, { when: new Date(0), big: -1n }],
      nested: { name: 'x', none: null },
    };
    expect(roundTrip(value)).toEqual(value);
    expect(roundTrip(new Date(5))).toEqual(new Date(5));
  });

  it('brings back a Uint8Array (a protobuf bytes field) as a Buffer of its bytes', () => {
    const whole = new Uint8Array([9, 0, 1, 255, 7]);
    const back = roundTrip({ bytes: whole.subarray(1, 4) }) as { bytes: Buffer };
    expect(Buffer.isBuffer(back.bytes)).toBe(true);
    expect([...back.bytes]).toEqual([0, 1, 255]);
  });

  it('gives back top-level primitives, undefined and an invalid Date', () => {
    for (const value of [undefined, null, 0, -1.5, '', 'text', true, 7n]) {
      expect(roundTrip(value)).toBe(value);
    }
    expect(Number.isNaN((roundTrip(new Date(NaN)) as Date).getTime())).toBe(true);
  });

  it('never reads stored data as a tag: objects with a `$` field come back as they were', () => {
    const value = { $: 'd', v: 1, inner: { $: 'n', v: '5' }, list: [{ $: 'u' }] };
    expect(roundTrip(value)).toEqual(value);
  });

  it('keeps a `__proto__` field a field, without changing the prototype', () => {
    const back = roundTrip(JSON.parse('{"__proto__":{"admin":true}}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect((back as { admin?: boolean }).admin).toBeUndefined();
    expect(Object.keys(back)).toEqual(['__proto__']);
  });

  it('decodes what is inside a `__proto__` field too', () => {
    const value = JSON.parse('{"__proto__": {"at": 1}}') as Record<string, unknown>;
    (value['__proto__'] as Record<string, unknown>).at = new Date(1);
    const back = roundTrip(value) as Record<string, unknown>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.hasOwn(back, '__proto__')).toBe(true);
    expect((back['__proto__'] as { at: unknown }).at).toEqual(new Date(1));
  });

  it('stores class instances as JSON would (toJSON, else own fields)', () => {
    class Money {
      constructor(readonly cents: number) {}
      toJSON() {
        return { cents: this.cents };
      }
    }
    expect(roundTrip({ price: new Money(5) })).toEqual({ price: { cents: 5 } });
    class Order {
      constructor(
        readonly id: string,
        readonly note?: string,
      ) {}
      get label() {
        return `order ${this.id}`;
      }
    }
    // Own fields only: no getter, no field holding undefined.
    expect(roundTrip(new Order('1'))).toEqual({ id: '1' });
    expect(Object.keys(roundTrip(new Order('1')) as object)).toEqual(['id']);
  });

  it('refuses cycles, functions, symbols and typed arrays other than bytes', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => encodeValue(cyclic)).toThrow(/cycle/);
    expect(() => encodeValue({ f: () => 1 })).toThrow(/function/);
    expect(() => encodeValue(Symbol('s'))).toThrow(/symbol/);
    expect(() => encodeValue({ s: Symbol('x') })).toThrow(TypeError);
    expect(() => encodeValue({ v: new Float64Array(2) })).toThrow(/Float64Array/);
  });

  it('lets one object appear twice (not a cycle)', () => {
    const shared = { at: new Date(2) };
    expect(roundTrip({ a: shared, b: shared })).toEqual({ a: shared, b: shared });
  });

  it('writes and reads plain JSON as JSON does, tagging only what needs it, however deep', () => {
    const payment = { id: 'p_1', amount: 1250, paid: true, note: null, lines: [{ sku: 'a' }] };
    expect(encodeValue(payment)).toBe(JSON.stringify(payment));
    expect(decodeValue(JSON.stringify(payment))).toEqual(payment);
    const bare = Object.assign(Object.create(null) as object, { a: 1 });
    expect(encodeValue(bare)).toBe('{"a":1}');
    expect(encodeValue({ a: undefined, b: [1, undefined] })).toBe('{"b":[1,{"$":"u"}]}');
    // Deeper than the plain check looks, a tag still comes back.
    let deep: unknown = new Date(5);
    for (let i = 0; i < 40; i++) deep = { d: deep };
    expect(decodeValue(encodeValue(deep))).toEqual(deep);
    const cycle: Record<string, unknown> = {};
    cycle.self = { back: cycle };
    expect(() => encodeValue(cycle)).toThrow(/cycle/);
  });

  it('refuses a tag it does not know', () => {
    expect(() => decodeValue('{"$":"zz"}')).toThrow(/unknown stored value tag/);
  });
});
