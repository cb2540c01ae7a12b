import type { ClaimRequest, ClaimResult } from '../idempotency.store';
import type { RedisListing } from './redis-listing';
import { listingEntry, pendingRecord, type RecordValue, unpackRecord } from './redis-records';
import type { NativeCommand } from './redis-scripts';

const CLAIMED: ClaimResult = { status: 'claimed' };
const KEY_REUSED: ClaimResult = { status: 'key_reused' };

/**
 * The Redis store's claim without a script: `SET key <pending record> NX PX <lease> GET`, and the
 * answer decided from its reply by lua/claim-2.lua's rules. Nil: the key is the caller's (its
 * listing entry follows, without waiting for it). A pending record: 409, or the caller's own
 * claim sent again by ioredis after its reply was lost with the connection. A completed record:
 * replayed. Another fingerprint: 422.
 */
export class NativeClaims {
  /** False once the server refused SET with both NX and GET (before Redis 7.0). */
  usable = true;

  constructor(
    /** How native commands are sent, in order with the scripts. */
    private readonly native: NativeCommand,
    private readonly listing: RedisListing,
  ) {}

  /**
   * The answer, or undefined where lua/claim-2.lua must give it: a completed body over 4 KiB
   * (stored apart: the script reads it with its record, of one moment, and frees a key whose
   * body Redis evicted), a SET Redis refused (a full Redis; before Redis 7.0, NX with GET).
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult | undefined> {
    const { native } = this;
    const { keys, id } = this.listing.claimKeys(key);
    const now = Date.now();
    const { about } = request;
    const entry = listingEntry(now, now + request.leaseMs, about?.route, about?.label);
    const record = pendingRecord(request.fingerprint, request.token, entry);
    let reply: Buffer | null;
    try {
      reply = (await native(
        'set',
        key,
        record,
        'PX',
        request.leaseMs,
        'NX',
        'GET',
      )) as Buffer | null;
    } catch (error) {
      // Redis refused the command, not the connection: a SET refused even where NX writes
      // nothing (OOM under noeviction, NOREPLICAS, MISCONF...), which the script, writing only
      // when it takes the key, answers for every read; before Redis 7.0, NX with GET at all.
      if ((error as Error).name !== 'ReplyError') throw error;
      if (/syntax error/i.test((error as Error).message)) this.usable = false;
      return undefined;
    }
    let claimed = entry;
    if (reply !== null) {
      const [state, fingerprint, third, fourth, fifth] = unpackRecord(reply, 5);
      if (mismatch(request.fingerprint, fingerprint)) return KEY_REUSED;
      if (state === null || typeof state === 'number') return undefined;
      if (state[0] === 0x63 /* 'c' */) {
        return { status: 'completed', response: { meta: String(third), body: bytes(fourth) } };
      }
      if (state[0] === 0x43 /* 'C' */) return undefined;
      if (!sameBytes(third, request.token)) {
        const left = leaseLeft(fifth);
        // A lease end past, on a live record: renewed by a release that kept no end in it, or
        // this clock is ahead. Redis knows.
        const retryAfterMs = left > 0 ? left : Number(await native('pttl', key));
        return { status: 'in_progress', retryAfterMs: Math.max(retryAfterMs, 0) };
      }
      // The caller's own claim, sent again: listed as its first send would have been.
      if (Buffer.isBuffer(fifth)) claimed = fifth;
    }
    if (keys[1] !== key) {
      // Not awaited: the handler need not wait for its listing. Sent on the same connection
      // before the completion or release, which replace it. Should it fail, the claim runs
      // unlisted (Redis is failing: its completion fails too, and the claim lapses).
      native('hset', keys[1], id, claimed).catch(() => undefined);
    }
    return CLAIMED;
  }
}

/** Whether a record's fingerprint refuses the caller's (lua/claim-2.lua's rule). */
function mismatch(requested: string, stored: RecordValue): boolean {
  return (
    requested !== '' &&
    Buffer.isBuffer(stored) &&
    stored.length > 0 &&
    !sameBytes(stored, requested)
  );
}

/** Whether `stored` holds the bytes ioredis sends for `text`, as the scripts compare them. */
function sameBytes(stored: RecordValue, text: string): boolean {
  return Buffer.isBuffer(stored) && stored.equals(Buffer.from(text));
}

function bytes(value: RecordValue): Buffer {
  return Buffer.isBuffer(value) ? value : Buffer.alloc(0);
}

/**
 * A pending record's lease left, in ms, from the lease's end its listing entry keeps (the
 * claim's, renewed by lua/extend-2.lua), on this process's clock; 0 for a record without one
 * (claimed by script on a key the index cannot hold, or by an older release): the store then
 * asks Redis (PTTL, a second round trip).
 */
function leaseLeft(entry: RecordValue): number {
  if (!Buffer.isBuffer(entry)) return 0;
  const leaseEnd = unpackRecord(entry, 2)[1];
  return typeof leaseEnd === 'number' ? leaseEnd - Date.now() : 0;
}
