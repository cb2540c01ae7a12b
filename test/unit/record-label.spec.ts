import { labelOwner, RecordLabels } from '../../lib/core/record-label';
import { recordKey, recordScope } from '../../lib/core/record-key';
import { RecordCipher } from '../../lib/utils/encryption';

const ROUTE = 'POST /payments';
const claimOf = (scope: string, clientKey: string, route = ROUTE) => ({
  key: recordKey('idempotency:', scope, clientKey),
  route,
  scope,
  clientKey,
});
const cipherOf = (secret: string) => new RecordCipher({ keys: [secret.repeat(40)] });

describe('record labels', () => {
  const plain = new RecordLabels();

  it.each([
    ['a principal', recordScope(ROUTE, undefined, 'id=s:42'), { user: { id: '42' } }],
    ['a tenant', recordScope(ROUTE, 's:acme', undefined), { tenant: 'acme' }],
    ['a tenant object', recordScope(ROUTE, 'id=n:7', undefined), { tenant: '7' }],
    [
      'a principal that is its id',
      recordScope(ROUTE, undefined, '=s:ann'),
      { user: { id: 'ann' } },
    ],
    ['no owner', ROUTE, {}],
  ])('keeps the key and %s, and opens them again', (_name, scope, owner) => {
    const claim = claimOf(scope, 'k-1');
    const about = plain.about(claim)!;
    expect(about.route).toBe(ROUTE);
    const opened = plain.open(about.label, claim.key)!;
    expect(opened.key).toBe('k-1');
    expect(labelOwner(opened.owner)).toEqual(owner);
  });

  it('is short plain text for what a header carries', () => {
    const claim = claimOf(recordScope(ROUTE, undefined, 'id=s:42'), 'k-1');
    expect(plain.about(claim)!.label).toBe('p9:u:id=s:42k-1');
  });

  it('writes a NUL or a lone surrogate as JSON, and gets the key back exactly', () => {
    for (const key of ['a\0b', 'x\ud800y']) {
      const claim = claimOf('run:orders', key, 'run:orders');
      const { label } = plain.about(claim)!;
      expect(label).not.toContain('\0');
      expect((label as string & { isWellFormed(): boolean }).isWellFormed()).toBe(true);
      expect(plain.open(label, claim.key)).toEqual({ owner: '', key });
    }
  });

  it('keeps a scope of another shape apart from the owner (an interceptor subclass)', () => {
    const claim = claimOf('my-own-scope', 'k-1');
    const opened = plain.open(plain.about(claim)!.label, claim.key)!;
    expect(opened).toEqual({ owner: '?my-own-scope', key: 'k-1' });
    expect(labelOwner(opened.owner)).toEqual({});
  });

  it('carries no label for a claim without a client key', () => {
    expect(plain.about({ key: 'idempotency:{x}', route: ROUTE })).toBeUndefined();
  });

  describe('with encryption', () => {
    const sealed = new RecordLabels(cipherOf('a'));
    const claim = claimOf(recordScope(ROUTE, 's:acme', undefined), 'secret-key-1');

    it('seals the key and the owner, bound to the record key', () => {
      const { label } = sealed.about(claim)!;
      expect(label).toMatch(/^s[0-9a-f]{8}\.[A-Za-z0-9_-]+$/);
      expect(label).not.toContain('secret-key-1');
      expect(label).not.toContain('acme');
      expect(sealed.open(label, claim.key)).toEqual({ owner: 't:s:acme', key: 'secret-key-1' });
      // Each claim seals afresh (a new nonce): equal keys do not give equal labels.
      expect(sealed.about(claim)!.label).not.toBe(label);
    });

    it('opens nothing it should not, and never throws', () => {
      const { label } = sealed.about(claim)!;
      const otherRecord = recordKey('idempotency:', 'POST /refunds', 'secret-key-1');
      expect(sealed.open(label, otherRecord)).toBeUndefined();
      expect(new RecordLabels(cipherOf('b')).open(label, claim.key)).toBeUndefined();
      expect(plain.open(label, claim.key)).toBeUndefined();
      const tampered = label.slice(0, -2) + (label.endsWith('A') ? 'BB' : 'AA');
      expect(sealed.open(tampered, claim.key)).toBeUndefined();
      for (const garbage of ['', 's', 'sxyz.', 'p', 'p99:ab', 'j{', 'j[1,2]', 'q', 42, null]) {
        expect(sealed.open(garbage, claim.key)).toBeUndefined();
      }
    });

    it('opens with a key that is no longer the first (rotation)', () => {
      const rotated = new RecordLabels(
        new RecordCipher({ keys: ['c'.repeat(40), 'a'.repeat(40)] }),
      );
      const { label } = sealed.about(claim)!;
      expect(rotated.open(label, claim.key)?.key).toBe('secret-key-1');
    });
  });
});
