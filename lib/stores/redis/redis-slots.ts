/**
 * Redis Cluster's hash slots, computed as Redis (and ioredis, with `cluster-key-slot`) computes
 * them: CRC16 (XMODEM) of the key's hash tag, or of the whole key without one, modulo 16384. The
 * listing index keeps one space per slot, named with a tag that maps to that slot, so that a
 * script touches keys of the record's slot only.
 */

/** How many hash slots a Cluster has. */
export const SLOTS = 16384;

const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let crc = i << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  TABLE[i] = crc & 0xffff;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

/**
 * The slot of `key` (its UTF-8 bytes): hashed by its tag when it has one, the bytes between its
 * first `{` and the first `}` after it, if any are.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % SLOTS;
  }
  return crc16(bytes) % SLOTS;
}

let tags: string[] | undefined;

/**
 * A hash tag per slot: `slotTags()[s]` maps to slot `s`. The first base-36 numbers (0, 1, ...,
 * about 170 000 of them are tried) each take the slot they map to if it has none yet. Part of
 * the data layout: every process must find the same tag for a slot, so this never changes.
 */
export function slotTags(): readonly string[] {
  if (tags) return tags;
  const found = new Array<string>(SLOTS);
  for (let i = 0, filled = 0; filled < SLOTS; i++) {
    const tag = i.toString(36);
    const slot = crc16(Buffer.from(tag)) % SLOTS;
    if (found[slot] === undefined) {
      found[slot] = tag;
      filled++;
    }
  }
  return (tags = found);
}
