import { decodeValue, encodeValue } from '../../lib/utils/value-codec';

const roundTrip = (value: unknown) => decodeValue(encodeValue(value));

describe('run() result codec', () => {
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

  it('stores class instances as JSON would (toJSON, else own fields)', () => {
    class Money {
      constructor(readonly cents: number) {}
      toJSON() {
        return { cents: this.cents };
      }
    }
    expect(roundTrip({ price: new Money(5) })).toEqual({ price: { cents: 5 } });
  });

  it('refuses cycles, functions and symbols', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => encodeValue(cyclic)).toThrow(/cycle/);
    expect(() => encodeValue({ f: () => 1 })).toThrow(/function/);
    expect(() => encodeValue(Symbol('s'))).toThrow(/symbol/);
  });

  it('refuses a tag it does not know', () => {
    expect(() => decodeValue('{"$":"zz"}')).toThrow(/unknown stored value tag/);
  });
});
