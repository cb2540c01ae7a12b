/**
 * A Redis record as the app writes and reads it without a script: the native claim's pending
 * record (`SET NX PX GET`) and what that command replies. The layout is lua/claim-2.lua's, a
 * MessagePack sequence in one string, in the subset Redis's cmsgpack writes: strings (str
 * formats), integers and nil, so that every script reads what the app wrote and the app what a
 * script wrote.
 */

/**
 * A completed response body over this many bytes is stored apart from its record (state 'C',
 * lua/complete-4.lua), so that what a claim's GET returns, and so what a 409 or 422 costs Redis,
 * stays under about this size whatever the body's.
 */
export const INLINE_BODY_MAX = 4096;

/** One value of a record: a string (as bytes), an integer, or nil. */
export type RecordValue = Buffer | number | null;

/** A pending record: 'p', fingerprint, owner token, not waited on (0), the listing entry. */
export function pendingRecord(fingerprint: string, token: string, entry: Buffer): Buffer {
  const fingerprintBytes = Buffer.byteLength(fingerprint);
  const tokenBytes = Buffer.byteLength(token);
  const out = Buffer.allocUnsafe(
    3 +
      headerSize(fingerprintBytes) +
      fingerprintBytes +
      headerSize(tokenBytes) +
      tokenBytes +
      headerSize(entry.length) +
      entry.length,
  );
  let at = out.writeUInt16BE(0xa170, 0); // fixstr of 1 byte: 'p'
  at = writeText(out, at, fingerprint, fingerprintBytes);
  at = writeText(out, at, token, tokenBytes);
  out[at++] = 0;
  entry.copy(out, writeHeader(out, at, entry.length));
  return out;
}

/**
 * A claim's listing entry (lua/listing-index.lua): claim time, lease end, route, label, released
 * (0) and reported (0); times in ms since the epoch.
 */
export function listingEntry(claimedAt: number, leaseEnd: number, route = '', label = ''): Buffer {
  const routeBytes = Buffer.byteLength(route);
  const labelBytes = Buffer.byteLength(label);
  const out = Buffer.allocUnsafe(
    18 + headerSize(routeBytes) + routeBytes + headerSize(labelBytes) + labelBytes + 2,
  );
  let at = writeTime(out, 0, claimedAt);
  at = writeTime(out, at, leaseEnd);
  at = writeText(out, at, route, routeBytes);
  at = writeText(out, at, label, labelBytes);
  out[at] = 0;
  out[at + 1] = 0;
  return out;
}

/**
 * The first `count` values of a record (fewer when it holds fewer): strings as Buffers (views
 * of `record`), integers as numbers. Throws on anything a record never holds.
 */
export function unpackRecord(record: Buffer, count: number): RecordValue[] {
  const values: RecordValue[] = [];
  let at = 0;
  while (values.length < count && at < record.length) {
    const type = record[at++];
    let length: number;
    if (type <= 0x7f) {
      values.push(type);
      continue;
    } else if (type >= 0xa0 && type <= 0xbf) {
      length = type & 0x1f;
    } else if (type === 0xd9 || type === 0xc4) {
      length = record[at];
      at += 1;
    } else if (type === 0xda || type === 0xc5) {
      length = record.readUInt16BE(at);
      at += 2;
    } else if (type === 0xdb || type === 0xc6) {
      length = record.readUInt32BE(at);
      at += 4;
    } else if (type === 0xcc || type === 0xcd || type === 0xce || type === 0xcf) {
      const size = 1 << (type - 0xcc);
      values.push(
        size === 8
          ? record.readUInt32BE(at) * 0x100000000 + record.readUInt32BE(at + 4)
          : record.readUIntBE(at, size),
      );
      at += size;
      continue;
    } else if (type === 0xc0) {
      values.push(null);
      continue;
    } else {
      throw new Error(`Unexpected MessagePack type 0x${type.toString(16)} in a record`);
    }
    if (at + length > record.length) throw new Error('Truncated record');
    values.push(record.subarray(at, at + length));
    at += length;
  }
  return values;
}

function headerSize(length: number): number {
  return length < 32 ? 1 : length < 0x100 ? 2 : length < 0x10000 ? 3 : 5;
}

function writeHeader(out: Buffer, at: number, length: number): number {
  if (length < 32) {
    out[at] = 0xa0 | length;
    return at + 1;
  }
  if (length < 0x100) {
    out[at] = 0xd9;
    out[at + 1] = length;
    return at + 2;
  }
  if (length < 0x10000) {
    out[at] = 0xda;
    return out.writeUInt16BE(length, at + 1);
  }
  out[at] = 0xdb;
  return out.writeUInt32BE(length, at + 1);
}

function writeText(out: Buffer, at: number, text: string, bytes: number): number {
  at = writeHeader(out, at, bytes);
  return at + out.write(text, at, bytes, 'utf8');
}

/** An integer as cmsgpack writes one over 2^32: uint64 (ms since the epoch are). */
function writeTime(out: Buffer, at: number, ms: number): number {
  out[at] = 0xcf;
  out.writeUInt32BE(Math.floor(ms / 0x100000000), at + 1);
  return out.writeUInt32BE(ms % 0x100000000, at + 5);
}
