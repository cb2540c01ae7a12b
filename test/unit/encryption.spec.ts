import { randomBytes } from 'node:crypto';
import { resolveModuleOptions } from '../../lib/options';
import { RecordCipher } from '../../lib/utils/encryption';
import { decodeResponse, encodeResponse, packResponse } from '../../lib/utils/response-codec';
import type { StoredResponse } from '../../lib';

const KEY = randomBytes(32);
const snapshot = { status: 201, headers: { location: '/payments/1' }, value: { card: '4242' } };
/** `snapshot` opened again: its JSON body's text beside the value. */
const opened = { ...snapshot, json: JSON.stringify(snapshot.value) };

function sealed(cipher: RecordCipher, context = 'idempotency:k'): StoredResponse {
  return packResponse(encodeResponse(snapshot), false, { cipher, context }) as StoredResponse;
}

describe('encryption keys at boot', () => {
  it.each([
    [{ keys: [] }, 'encryption.keys is empty'],
    [{ keys: ['too short'] }, 'encryption.keys[0] is a string of 9 characters; use at least 32'],
    [{ keys: [randomBytes(16)] }, 'encryption.keys[0] is a Buffer of 16 bytes'],
    [{ keys: [KEY, 42] }, 'encryption.keys[1] must be a 32-byte Buffer'],
    ['secret', 'encryption must be { keys: [currentKey, ...previousKeys] }'],
    [{ keys: KEY }, 'encryption must be { keys: [currentKey, ...previousKeys] }'],
  ])('refuses %p', (encryption, message) => {
    expect(() => resolveModuleOptions({ encryption: encryption as never })).toThrow(
      `IdempotencyModule: ${message}`,
    );
  });

  it('takes 32-byte Buffers and strings of 32 characters or more', () => {
    expect(() =>
      resolveModuleOptions({ encryption: { keys: [KEY, randomBytes(24).toString('base64')] } }),
    ).not.toThrow();
  });
});

describe('RecordCipher', () => {
  it('seals the headers and body, leaving only the status and the key id readable', () => {
    const stored = sealed(new RecordCipher({ keys: [KEY] }));
    expect(Object.keys(JSON.parse(stored.meta))).toEqual(['s', 'x']);
    expect(stored.body.includes('4242')).toBe(false);
    expect(stored.meta).not.toContain('/payments/1');
  });

  it('opens what any of its keys sealed, and seals with the first', async () => {
    const old = new RecordCipher({ keys: [KEY] });
    const rotated = new RecordCipher({ keys: ['a newer secret of thirty-two chars!', KEY] });
    const context = { cipher: rotated, context: 'idempotency:k' };
    expect(decodeResponse(sealed(old), context)).toEqual(opened);
    expect(decodeResponse(sealed(rotated), context)).toEqual(opened);
    expect(() =>
      decodeResponse(sealed(rotated), { cipher: old, context: 'idempotency:k' }),
    ).toThrow(/not in encryption.keys/);
  });

  it('refuses a record moved to another key, altered, or with its status rewritten', () => {
    const cipher = new RecordCipher({ keys: [KEY] });
    const stored = sealed(cipher);
    const at = (context: string) => ({ cipher, context });
    expect(() => decodeResponse(stored, at('idempotency:other'))).toThrow();
    const flipped = Buffer.from(stored.body);
    flipped[flipped.length - 1] ^= 1;
    expect(() => decodeResponse({ ...stored, body: flipped }, at('idempotency:k'))).toThrow();
    const meta = stored.meta.replace('201', '200');
    expect(() => decodeResponse({ ...stored, meta }, at('idempotency:k'))).toThrow();
  });

  it('refuses a plaintext record when sealing, and a sealed one when not', () => {
    const cipher = new RecordCipher({ keys: [KEY] });
    const plain = packResponse(encodeResponse(snapshot), false) as StoredResponse;
    expect(() => decodeResponse(plain, { cipher, context: 'idempotency:k' })).toThrow(
      'the record is not encrypted',
    );
    expect(() => decodeResponse(sealed(cipher))).toThrow('no encryption keys are set');
  });

  it('derives the same key from the same secret string', async () => {
    const secret = 's'.repeat(40);
    const stored = sealed(new RecordCipher({ keys: [secret] }));
    const other = { cipher: new RecordCipher({ keys: [secret] }), context: 'idempotency:k' };
    expect(decodeResponse(stored, other)).toEqual(opened);
  });
});
