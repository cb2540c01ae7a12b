import { fingerprint } from '../../lib/utils/fingerprint';

describe('fingerprint', () => {
  const parts = ['POST', '/payments'];

  it('ignores object key order, at any depth', () => {
    expect(fingerprint(parts, { a: 1, b: { c: [1, 2], d: 'x' } })).toBe(
      fingerprint(parts, { b: { d: 'x', c: [1, 2] }, a: 1 }),
    );
  });

  it('treats a property holding undefined like a missing one, as JSON does', () => {
    expect(fingerprint(parts, { a: 1, b: undefined })).toBe(fingerprint(parts, { a: 1 }));
  });

  it.each([
    [{ amount: 1 }, { amount: '1' }],
    [{ amount: 1 }, { amount: 2 }],
    [
      [1, 2],
      [2, 1],
    ],
    [{ a: null }, { a: 'null' }],
    ['ab', Buffer.from('ab')],
    [{ ab: 'c' }, { a: 'bc' }],
  ])('tells %j from %j', (a, b) => {
    expect(fingerprint(parts, a)).not.toBe(fingerprint(parts, b));
  });

  it('depends on the method and the URL', () => {
    const body = { amount: 1 };
    expect(fingerprint(['POST', '/a'], body)).not.toBe(fingerprint(['PUT', '/a'], body));
    expect(fingerprint(['POST', '/a'], body)).not.toBe(fingerprint(['POST', '/a?x=1'], body));
  });
});

describe('fingerprint on hostile payloads', () => {
  it('hashes a body nested 100 000 levels deep without overflowing the stack', () => {
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000));
    const deeper = JSON.parse('['.repeat(100_001) + ']'.repeat(100_001));
    expect(fingerprint(['POST', '/x'], deep)).not.toBe(fingerprint(['POST', '/x'], deeper));
  });
});

describe('fingerprint on cyclic payloads', () => {
  it('terminates, and still tells cycles through different paths apart', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    const b: Record<string, unknown> = { x: 2 };
    b.self = b;
    expect(fingerprint(['rpc'], a)).not.toBe(fingerprint(['rpc'], b));
    const shared = { y: 1 };
    // A shared (acyclic) object is no cycle: it hashes like two copies.
    expect(fingerprint(['rpc'], { p: shared, q: shared })).toBe(
      fingerprint(['rpc'], { p: { y: 1 }, q: { y: 1 } }),
    );
  });
});

describe('fingerprint forms', () => {
  const parts = ['POST', '/x'];
  it.each([
    [
      { b: 1, a: 'x' },
      { a: 'x', b: 1 },
    ],
    [{ a: 1, b: undefined }, { a: 1 }],
    [
      { 10: 1, 9: 2 },
      { 9: 2, 10: 1 },
    ],
    [{ list: [{ b: 1, a: 2 }] }, { list: [{ a: 2, b: 1 }] }],
  ])('gives %j and %j one form', (a, b) => {
    expect(fingerprint(parts, a)).toBe(fingerprint(parts, b));
  });

  it.each([
    [Object.assign(new Array(2), { 1: 1 }), [null, 1]],
    [
      [undefined, 1],
      [null, 1],
    ],
    [[NaN], [null]],
    [{ a: Infinity }, { a: null }],
    [[1, 2], [[1, 2]]],
    [{ a: [1] }, { a: { 0: 1 } }],
  ])('tells %j from %j', (a, b) => {
    expect(fingerprint(parts, a)).not.toBe(fingerprint(parts, b));
  });

  it('hashes an object by its properties, not its toJSON()', () => {
    const a = { id: 1, toJSON: () => 'same' };
    const b = { id: 2, toJSON: () => 'same' };
    expect(fingerprint(parts, a)).not.toBe(fingerprint(parts, b));
  });

  it('finds a cycle that starts deep in the payload', () => {
    let deep: Record<string, unknown> = {};
    const root = deep;
    for (let i = 0; i < 200; i++) deep = (deep.next = {}) as Record<string, unknown>;
    const loop: Record<string, unknown> = { a: { b: {} } };
    ((loop.a as Record<string, unknown>).b as Record<string, unknown>).c = loop;
    deep.loop = loop;
    expect(fingerprint(parts, root)).toMatch(/^[\w-]{22}$/);
  });
});

describe('fingerprint of hostile text', () => {
  const parts = ['POST', '/x'];
  it.each([
    // Keys unsorted, so the sorted copy is built: __proto__ (as JSON.parse makes it) stays a key.
    ['{"amount":1,"__proto__":"x"}', '{"amount":1}'],
    ['{"b":1,"a":1,"__proto__":"x"}', '{"b":1,"a":1,"__proto__":"y"}'],
    // Lone surrogates, which UTF-8 would turn into the same U+FFFD.
    ['{"note":"\\ud800","meta":{"x":1}}', '{"note":"\\udc00","meta":{"x":1}}'],
    ['{"note":"\\ud800"}', '{"note":"\\ufffd"}'],
  ])('tells %s from %s', (a, b) => {
    expect(fingerprint(parts, JSON.parse(a))).not.toBe(fingerprint(parts, JSON.parse(b)));
  });

  it('stops with a RangeError once the canonical form outgrows its budget', () => {
    const big = { items: Array.from({ length: 1000 }, (_, i) => ({ i, text: 'x'.repeat(50) })) };
    expect(() => fingerprint([], big, 10_000)).toThrow(RangeError);
    expect(fingerprint([], big)).toHaveLength(22);
  });
});

describe('fingerprint of Maps and Sets', () => {
  const of = (payload: unknown) => fingerprint(['RPC', 'pay'], payload);

  it('tells Maps (and Sets) with other content apart', () => {
    expect(of(new Map([['amount', 100]]))).not.toBe(of(new Map([['amount', 200]])));
    expect(of(new Map([['a', 1]]))).not.toBe(of(new Map()));
    expect(of({ lines: new Map([[1, 'x']]) })).not.toBe(of({ lines: new Map([[2, 'x']]) }));
    expect(of(new Set(['a']))).not.toBe(of(new Set(['b'])));
    expect(of(new Set([{ id: 1 }]))).not.toBe(of(new Set([{ id: 2 }])));
  });

  it('ignores insertion order where the keys are all strings or all numbers', () => {
    const map = (entries: [unknown, unknown][]) => of(new Map(entries));
    expect(
      map([
        ['b', 2],
        ['a', 1],
      ]),
    ).toBe(
      map([
        ['a', 1],
        ['b', 2],
      ]),
    );
    expect(
      map([
        [10, 'x'],
        [9, 'y'],
      ]),
    ).toBe(
      map([
        [9, 'y'],
        [10, 'x'],
      ]),
    );
    expect(of(new Set(['b', 'a']))).toBe(of(new Set(['a', 'b'])));
    expect(of(new Set([3, 1, 2]))).toBe(of(new Set([1, 2, 3])));
  });

  it('never gives a Map, a Set, an array and an object one form', () => {
    const forms = [
      of(new Map([['a', 1]])),
      of(new Set(['a', 1])),
      of(['a', 1]),
      of({ a: 1 }),
      of(new Map()),
      of(new Set()),
      of({}),
      of([]),
    ];
    expect(new Set(forms).size).toBe(forms.length);
  });

  it('terminates on a Map that holds itself', () => {
    const map = new Map<string, unknown>();
    map.set('self', map);
    const set = new Set<unknown>();
    set.add(set);
    expect(of(map)).toMatch(/^[\w-]+$/);
    expect(of(set)).toMatch(/^[\w-]+$/);
  });
});
