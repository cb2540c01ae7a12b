import Redis from 'ioredis';
import { listingEntry, pendingRecord, unpackRecord } from '../../lib/stores/redis/redis-records';
import { testRedisUrl } from '../support/redis';

/**
 * The records the app packs itself for a claim without a script (SET NX GET) are read by the
 * scripts with Redis's own cmsgpack, and the records the scripts pack are read by the app: the
 * two must agree on every string length's format and on times past 2^32.
 */
describe('Redis records packed by the app and by the scripts alike', () => {
  let client: Redis;

  beforeAll(() => {
    client = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
  });
  afterAll(() => client.disconnect());

  /** `record` unpacked by cmsgpack, its values as Buffers or numbers. */
  const unpackedByLua = async (record: Buffer) =>
    (await client.callBuffer('EVAL', 'return {cmsgpack.unpack(ARGV[1])}', 0, record)) as (
      Buffer | number
    )[];

  const LENGTHS = [0, 1, 31, 32, 255, 256, 65_535, 65_536];

  it.each(LENGTHS)('a pending record with %i-byte strings reads the same in Lua', async (n) => {
    const fingerprint = 'f'.repeat(n);
    const token = 'é'.repeat(Math.ceil(n / 2));
    const entry = listingEntry(1_796_538_262_884, 1_796_538_292_884, 'r'.repeat(n), 'label');
    const [state, lf, lt, waiting, le] = await unpackedByLua(
      pendingRecord(fingerprint, token, entry),
    );
    expect([String(state), String(lf), String(lt), waiting]).toEqual(['p', fingerprint, token, 0]);
    expect(Buffer.compare(le as Buffer, entry)).toBe(0);
    const [claimedAt, leaseEnd, route, label, released, reported] = await unpackedByLua(entry);
    expect([claimedAt, leaseEnd, String(route), String(label), released, reported]).toEqual([
      1_796_538_262_884,
      1_796_538_292_884,
      'r'.repeat(n),
      'label',
      0,
      0,
    ]);
    // And the app reads back what it packed.
    const [, af, at] = unpackRecord(pendingRecord(fingerprint, token, entry), 3);
    expect([String(af), String(at)]).toEqual([fingerprint, token]);
  });

  it.each(LENGTHS)(
    'a record cmsgpack packs with %i-byte strings reads the same here',
    async (n) => {
      const body = Buffer.alloc(n, 0xff);
      const packed = (await client.callBuffer(
        'EVAL',
        "return cmsgpack.pack('c', ARGV[1], ARGV[2], ARGV[3], 1796538262884, 0, 300)",
        0,
        'fp',
        'm'.repeat(n),
        body,
      )) as Buffer;
      const [state, fingerprint, meta, stored, completedAt, zero, small] = unpackRecord(packed, 7);
      expect([String(state), String(fingerprint), String(meta)]).toEqual([
        'c',
        'fp',
        'm'.repeat(n),
      ]);
      expect(Buffer.compare(stored as Buffer, body)).toBe(0);
      expect([completedAt, zero, small]).toEqual([1_796_538_262_884, 0, 300]);
    },
  );

  it('refuses what no record holds, and a record cut short', () => {
    expect(() => unpackRecord(Buffer.from([0xcb, 0, 0, 0, 0, 0, 0, 0, 0]), 1)).toThrow(
      /Unexpected MessagePack type 0xcb/,
    );
    expect(() => unpackRecord(Buffer.from([0xa5, 0x61]), 1)).toThrow(/Truncated/);
  });
});
