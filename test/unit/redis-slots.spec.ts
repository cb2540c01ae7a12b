import { randomBytes } from 'node:crypto';
import { keySlot, SLOTS, slotTags } from '../../lib/stores/redis/redis-slots';

// ioredis's own slot function (a dependency of ioredis): the listing index must put a record's
// space on the slot ioredis routes the record's key to.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const clusterKeySlot = require('cluster-key-slot') as (key: string) => number;

describe('Redis Cluster slots (the listing index’s spaces)', () => {
  it('computes the slot ioredis computes, hash tags and multi-byte keys included', () => {
    const keys = [
      'idempotency:{AbCdEfGhIjKlMnOpQrStUv}',
      '{user1000}.following',
      'foo{{bar}}zap',
      'foo{bar}{zap}',
      '{',
      '}{',
      'prefix:é€😀:{x}',
      '',
    ];
    for (let i = 0; i < 500; i++) keys.push(`p${i}:{${randomBytes(16).toString('base64url')}}`);
    for (const key of keys) expect([key, keySlot(key)]).toEqual([key, clusterKeySlot(key)]);
    // An empty tag hashes the whole key: Redis answers 8363 (CLUSTER KEYSLOT), where
    // cluster-key-slot reads the next tag (4015; ioredis then follows Redis's MOVED). The index
    // goes by Redis's answer, which decides where a script may touch keys.
    expect(keySlot('foo{}{bar}')).toBe(8363);
  });

  it('has a tag for every slot, which maps to it, the same in every process', () => {
    const tags = slotTags();
    expect(tags).toHaveLength(SLOTS);
    for (const [slot, tag] of tags.entries()) {
      expect(clusterKeySlot(`idempotency:ix{${tag}}:runs`)).toBe(slot);
    }
    // Part of the data layout: a process with other tags would look for other keys.
    expect([tags[0], tags[1], tags[100], tags[15495], tags[16383]]).toEqual([
      '1bz',
      'emj',
      '8fj',
      'a',
      'hia',
    ]);
  });
});
