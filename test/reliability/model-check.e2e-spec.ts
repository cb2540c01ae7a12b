import fc from 'fast-check';
import Redis from 'ioredis';
import {
  ClaimResult,
  IdempotencyStore,
  MemoryIdempotencyStore,
  RedisIdempotencyStore,
} from '../../lib';
import { inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';

/**
 * Model check: random interleavings of claim, complete, release, extend and clock advances across
 * several owners, run against a small reference model and a real store; every result must agree.
 * Agreement with the model is what proves the properties: at most one owner at a time, a
 * completed record is never overwritten by anyone, a released or expired record is claimable,
 * and TTLs hold. Full size everywhere: 10 000 runs per store take about 15 s here.
 */
const RUNS = { memory: 10_000, redis: 10_000 };

const KEYS = ['k1', 'k2'];
const OWNERS = ['a', 'b', 'c'];
const SECOND = 1_000; // every duration is whole seconds, so real-time drift never crosses a bound

type Op =
  | { kind: 'claim'; key: string; owner: string; fp: string; lease: number }
  | { kind: 'complete'; key: string; owner: string; ttl: number }
  | { kind: 'release'; key: string; owner: string }
  | { kind: 'extend'; key: string; owner: string; lease: number }
  | { kind: 'advance'; ms: number };

const seconds = fc.integer({ min: 1, max: 4 }).map((n) => n * SECOND);
const key = fc.constantFrom(...KEYS);
const owner = fc.constantFrom(...OWNERS);
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('claim' as const),
    key,
    owner,
    fp: fc.constantFrom('x', 'y', ''),
    lease: seconds,
  }),
  fc.record({ kind: fc.constant('complete' as const), key, owner, ttl: seconds }),
  fc.record({ kind: fc.constant('release' as const), key, owner }),
  fc.record({ kind: fc.constant('extend' as const), key, owner, lease: seconds }),
  fc.record({
    kind: fc.constant('advance' as const),
    ms: fc.integer({ min: 0, max: 3 }).map((n) => n * SECOND),
  }),
);

interface ModelRecord {
  state: 'pending' | 'completed';
  owner: string;
  fp: string;
  expiresAt: number;
  body?: string;
}

/** The reference: the contract written as plainly as possible. */
class Model {
  now = 0;
  records = new Map<string, ModelRecord>();

  live(key: string) {
    const record = this.records.get(key);
    if (record && record.expiresAt <= this.now) this.records.delete(key);
    return this.records.get(key);
  }

  apply(o: Op): unknown {
    if (o.kind === 'advance') return ((this.now += o.ms), undefined);
    const record = this.live(o.key);
    switch (o.kind) {
      case 'claim':
        if (!record) {
          this.records.set(o.key, {
            state: 'pending',
            owner: o.owner,
            fp: o.fp,
            expiresAt: this.now + o.lease,
          });
          return { status: 'claimed' };
        }
        if (o.fp && record.fp && o.fp !== record.fp) return { status: 'key_reused' };
        if (record.state === 'completed') return { status: 'completed', body: record.body };
        // The same claim sent again (a client resending a command whose reply it lost).
        if (record.owner === o.owner) return { status: 'claimed' };
        return { status: 'in_progress', retryAfterMs: record.expiresAt - this.now };
      case 'complete':
        if (record?.state !== 'pending' || record.owner !== o.owner) return false;
        Object.assign(record, {
          state: 'completed',
          body: `by-${o.owner}`,
          expiresAt: this.now + o.ttl,
        });
        return true;
      case 'release':
        if (record?.state !== 'pending' || record.owner !== o.owner) return false;
        this.records.delete(o.key);
        return true;
      case 'extend':
        if (record?.state !== 'pending' || record.owner !== o.owner) return false;
        record.expiresAt = this.now + o.lease;
        return true;
    }
  }
}

/** Runs one op on a store; claim results are reduced to what the model can predict. */
async function run(store: IdempotencyStore, prefix: string, o: Exclude<Op, { kind: 'advance' }>) {
  const k = prefix + o.key;
  switch (o.kind) {
    case 'claim': {
      const result: ClaimResult = await store.claim(k, {
        token: o.owner,
        fingerprint: o.fp,
        leaseMs: o.lease,
      });
      if (result.status === 'completed')
        return { status: 'completed', body: result.response.body.toString() };
      return result;
    }
    case 'complete':
      return store.complete(k, o.owner, { meta: 'm', body: Buffer.from(`by-${o.owner}`) }, o.ttl);
    case 'release':
      return store.release(k, o.owner);
    case 'extend':
      return store.extend(k, o.owner, o.lease);
  }
}

function expectAgreement(actual: unknown, expected: unknown, tolerance: number) {
  const a = actual as { status?: string; retryAfterMs?: number };
  const e = expected as { status?: string; retryAfterMs?: number };
  if (e?.status === 'in_progress' && a?.status === 'in_progress') {
    // A real clock keeps running between ops: allow it to have eaten a little of the lease.
    expect(a.retryAfterMs).toBeLessThanOrEqual(e.retryAfterMs!);
    expect(a.retryAfterMs).toBeGreaterThan(e.retryAfterMs! - tolerance);
  } else {
    expect(actual).toEqual(expected);
  }
}

describe('model check of the store contract', () => {
  it(`memory store agrees with the model over ${RUNS.memory} random interleavings`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
        const model = new Model();
        const store = new MemoryIdempotencyStore({ now: () => model.now, sweepIntervalMs: 0 });
        for (const o of ops) {
          const expected = model.apply(o);
          if (o.kind !== 'advance') expectAgreement(await run(store, '', o), expected, 1);
        }
      }),
      { numRuns: RUNS.memory },
    );
  });

  describe('on Redis', () => {
    let client: Redis;
    let store: RedisIdempotencyStore;
    beforeAll(() => {
      client = inspectionClient();
      store = new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true });
    });
    afterAll(async () => {
      await store.close();
      await client.quit();
    });

    /**
     * Moves Redis's clock for our keys: every TTL shortened by `ms`, expired ones deleted, and the
     * lease end a pending record keeps (in its listing entry, which a 409's Retry-After is told
     * from) moved back as much.
     */
    async function advance(prefix: string, ms: number) {
      for (const k of KEYS) {
        const ttl = await client.pttl(prefix + k);
        if (ttl < 0) continue;
        if (ttl - ms <= 0) await client.del(prefix + k);
        else await client.eval(ADVANCE_LEASE_END, 1, prefix + k, ttl - ms, ms);
      }
    }

    const ADVANCE_LEASE_END = `
      local s, f, o, w, e = cmsgpack.unpack(redis.call('GET', KEYS[1]))
      if s == 'p' and e then
        local at, lease, route, label, released, reported = cmsgpack.unpack(e)
        e = cmsgpack.pack(at, lease - ARGV[2], route, label, released, reported)
        redis.call('SET', KEYS[1], cmsgpack.pack(s, f, o, w, e), 'KEEPTTL')
      end
      return redis.call('PEXPIRE', KEYS[1], ARGV[1])`;

    it(`Redis store agrees with the model over ${RUNS.redis} random interleavings`, async () => {
      const base = uniquePrefix('model');
      let runNumber = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 30 }), async (ops) => {
          const prefix = `${base}${++runNumber}:`;
          const model = new Model();
          try {
            for (const o of ops) {
              const expected = model.apply(o);
              if (o.kind === 'advance') await advance(prefix, o.ms);
              else expectAgreement(await run(store, prefix, o), expected, 500);
            }
          } finally {
            await client.del(...KEYS.map((k) => prefix + k));
          }
        }),
        { numRuns: RUNS.redis },
      );
    }, 120_000);
  });
});
