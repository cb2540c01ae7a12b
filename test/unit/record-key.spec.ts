import { recordKey, recordScope } from '../../lib/core/record-key';

describe('recordKey', () => {
  it('hashes the client key into a hash tag, so no raw input reaches the key name', () => {
    const key = recordKey('idempotency:', 'Payments.create', 'evil*{tag}\r\n');
    expect(key).toMatch(/^idempotency:\{[A-Za-z0-9_-]{22}\}$/);
  });

  it('keeps lone surrogates apart (UTF-8 would make both U+FFFD)', () => {
    expect(recordKey('p:', 'A\0u:id=s:user-\ud800', 'k')).not.toBe(
      recordKey('p:', 'A\0u:id=s:user-\udc00', 'k'),
    );
  });

  it('separates scopes: the same client key on two handlers gives two records', () => {
    expect(recordKey('p:', 'A.create', 'k')).not.toBe(recordKey('p:', 'B.create', 'k'));
  });

  it('keeps the store keys of route and run() records as earlier releases computed them', () => {
    // Records stored before an upgrade must still replay: these are the keys 0.1.0 wrote.
    const key = (tenant?: string, principal?: string) =>
      recordKey('idempotency:', recordScope('POST /payments', tenant, principal), 'k-1');
    expect(key(undefined, '42')).toBe('idempotency:{YtXtQ-4KPdaZNbLdl914kt}');
    expect(key('acme')).toBe('idempotency:{R6m5NIgqbjJa5ar2AgBrgs}');
    expect(key()).toBe('idempotency:{No423AXNBTA1eC1k1Pku7r}');
    expect(recordKey('idempotency:', 'run:orders', 'order-7')).toBe(
      'idempotency:{nQawyouKzArxl_Sd6LFFfq}',
    );
  });

  it.each([
    ['run:tenant\0b', 'c', 'run:tenant', 'b\0c'],
    ['run:a\0', 'b', 'run:a', '\0b'],
    ['run:a', 'b\0', 'run:a\0b', ''],
    ['R\0t:x', 'k\0', 'R', 't:x\0k\0'],
  ])('gives %j + %j and %j + %j two records', (scopeA, keyA, scopeB, keyB) => {
    expect(recordKey('p:', scopeA, keyA)).not.toBe(recordKey('p:', scopeB, keyB));
  });

  it('never confuses the JSON form of a key holding NUL with a scope holding JSON', () => {
    const json = JSON.stringify(['run:a', 'b\0c']);
    expect(recordKey('p:', 'run:a', 'b\0c')).not.toBe(recordKey('p:', `\0${json}`, 'x'));
    expect(recordKey('p:', 'run:a', 'b\0c')).not.toBe(recordKey('p:', '', json));
  });
});
