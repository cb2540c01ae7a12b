import {
  IdempotencyScopeError,
  principalId,
  requestPrincipal,
  tenantId,
} from '../../lib/utils/principal';

describe('principalId', () => {
  it('is undefined without a principal', () => {
    expect(principalId(undefined, 'h')).toBeUndefined();
    expect(principalId(null, 'h')).toBeUndefined();
  });

  it('takes id, sub, userId, _id in that order and ignores tokens and timestamps', () => {
    expect(principalId({ sub: 'b', id: 'a' }, 'h')).toBe(principalId({ id: 'a' }, 'h'));
    expect(principalId({ sub: 'b', token: 't1', iat: 1 }, 'h')).toBe(
      principalId({ sub: 'b', token: 't2', iat: 2, exp: 3 }, 'h'),
    );
    expect(principalId({ id: '', userId: 'c' }, 'h')).toBe(principalId({ userId: 'c' }, 'h'));
  });

  it.each([
    [{ id: 1 }, { id: '1' }],
    [{ id: 1 }, { sub: 1 }],
    [{ id: '1' }, { sub: '1' }],
    ['1', { id: '1' }],
    ['1', 1],
    [{ _id: { toString: () => '1' } }, { _id: '1' }],
    [{ userId: 1n }, { userId: 1 }],
    // Binary ids: as text, invalid UTF-8 would all read as U+FFFD.
    [{ id: Buffer.from('80'.repeat(16), 'hex') }, { id: Buffer.from('ff'.repeat(16), 'hex') }],
  ])('never gives %p and %p one identity', (a, b) => {
    expect(principalId(a, 'h')).not.toBe(principalId(b, 'h'));
  });

  it.each([[{}], [{ id: '' }], [{ id: {} }], [{ id: NaN }], [true], [{ token: 'x' }], [[1]]])(
    'fails closed for %p, naming the option',
    (user) => {
      expect(() => principalId(user, 'Orders.create')).toThrow(IdempotencyScopeError);
      expect(() => principalId(user, 'Orders.create')).toThrow(/Orders\.create.*`scope`/);
    },
  );
});

describe('tenantId', () => {
  it('types ids, identifies tenant objects like principals, and refuses what identifies nobody', () => {
    expect(tenantId(undefined, 'H.m')).toBeUndefined();
    expect(tenantId(null, 'H.m')).toBeUndefined();
    expect(tenantId('1', 'H.m')).not.toBe(tenantId(1, 'H.m'));
    expect(tenantId({ id: 'a', plan: 'pro' }, 'H.m')).not.toBe(
      tenantId({ id: 'b', plan: 'pro' }, 'H.m'),
    );
    expect(tenantId({ id: 'a', plan: 'pro' }, 'H.m')).toBe(
      tenantId({ id: 'a', plan: 'free' }, 'H.m'),
    );
    for (const nobody of ['', {}, { plan: 'pro' }, [], true, Promise.resolve('a')]) {
      expect(() => tenantId(nobody, 'H.m')).toThrow(IdempotencyScopeError);
    }
  });
});

describe('requestPrincipal', () => {
  it('reads request.user, else the raw request user a Fastify middleware set', () => {
    expect(requestPrincipal({ user: { id: 1 } })).toEqual({ id: 1 });
    expect(requestPrincipal({ raw: { user: { id: 2 } } })).toEqual({ id: 2 });
    expect(requestPrincipal({ user: { id: 1 }, raw: { user: { id: 2 } } })).toEqual({ id: 1 });
    expect(requestPrincipal({ user: null, raw: { user: { id: 2 } } })).toEqual({ id: 2 });
  });

  it('is undefined without one, or without a request', () => {
    expect(requestPrincipal({ headers: {} })).toBeUndefined();
    expect(requestPrincipal({ raw: null })).toBeUndefined();
    expect(requestPrincipal(undefined)).toBeUndefined();
  });
});
