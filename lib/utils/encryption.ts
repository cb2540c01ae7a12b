import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  type KeyObject,
  createSecretKey,
} from 'node:crypto';
import type { IdempotencyEncryptionOptions } from '../interfaces/idempotency-module-options.interface';
import type { StoredResponse } from '../stores/idempotency.store';
import { ENCRYPTION_KEY_BYTES } from '../options/secrets';

/** GCM's recommended nonce and its full tag, in bytes. */
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** HKDF salt and info: a key derived here is never the same as one derived for another use. */
const HKDF_SALT = 'nestjs-idempotency';
const HKDF_INFO = 'record encryption v1';

/** A key ready to use: the AES key and the short id records name it by. */
interface RecordKey {
  id: string;
  key: KeyObject;
}

/**
 * Seals and opens stored responses (option `encryption`) with AES-256-GCM. A sealed record's meta
 * keeps only what operators read without the keys (`IdempotencyRecords`: the status and whether
 * it is an error) and the id of the key that sealed it; the full meta (headers, body kind,
 * compression) travels inside the ciphertext with the body. The authenticated data binds the
 * ciphertext to its record key and its public meta, so a record copied under another key, or
 * whose status was rewritten, does not open.
 */
export class RecordCipher {
  private readonly keys: RecordKey[];

  constructor(options: IdempotencyEncryptionOptions) {
    this.keys = options.keys.map((secret) => {
      const bytes = Buffer.isBuffer(secret)
        ? secret
        : Buffer.from(hkdfSync('sha256', secret, HKDF_SALT, HKDF_INFO, ENCRYPTION_KEY_BYTES));
      // An id, not the key: an HMAC of a fixed label, 8 hex digits.
      const id = createHmac('sha256', bytes).update('key id').digest('hex').slice(0, 8);
      return { id, key: createSecretKey(bytes) };
    });
  }

  /**
   * The sealed form of `meta` (the codec's JSON meta) and `body`. `publicMeta` is what stays
   * readable; `context` (the record key) is authenticated with it.
   */
  seal(
    meta: string,
    body: Buffer,
    publicMeta: Record<string, unknown>,
    context: string,
  ): StoredResponse {
    const { id, key } = this.keys[0];
    const outer = JSON.stringify({ ...publicMeta, x: id });
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(`${context}\0${outer}`));
    const metaBytes = Buffer.from(meta, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(metaBytes.length);
    const sealed = Buffer.concat([
      iv,
      Buffer.alloc(TAG_BYTES), // the tag's place, known once the cipher is final
      cipher.update(length),
      cipher.update(metaBytes),
      cipher.update(body),
      cipher.final(),
    ]);
    cipher.getAuthTag().copy(sealed, IV_BYTES);
    return { meta: outer, body: sealed };
  }

  /**
   * The inner meta and body of a sealed record whose public meta names key `id`.
   * Throws when no key has that id, or the record was altered or sealed for another key.
   */
  open(outer: string, id: unknown, body: Buffer, context: string): StoredResponse {
    const found = this.keys.find((candidate) => candidate.id === id);
    if (!found) throw new Error(`sealed with a key not in encryption.keys (id ${String(id)})`);
    if (body.length < IV_BYTES + TAG_BYTES + 4) throw new Error('sealed record too short');
    const decipher = createDecipheriv('aes-256-gcm', found.key, body.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(`${context}\0${outer}`));
    decipher.setAuthTag(body.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    const plain = Buffer.concat([
      decipher.update(body.subarray(IV_BYTES + TAG_BYTES)),
      decipher.final(), // throws when the tag does not match: altered, or another key
    ]);
    const metaLength = plain.readUInt32BE(0);
    const meta = plain.toString('utf8', 4, 4 + metaLength);
    return { meta, body: plain.subarray(4 + metaLength) };
  }
}

/** What a codec call needs to seal or open a record: the cipher and the record's key. */
export interface Sealing {
  cipher: RecordCipher;
  /** The store key of the record (authenticated with it). */
  context: string;
}
