// The floor of issue 41: the least work a fenced idempotency layer must do on Redis with ioredis,
// measured beside this library by npm run bench (never part of lib/). One record per key, a
// string: the claim's owner token while the work runs, the outcome once it is done.
//
// - claim: one native command, `SET key <token> NX PX <lease> GET`. Nil: claimed. Anything else
//   is the record: a token (it starts with `~`, which no outcome starts with) means in progress,
//   else the stored outcome, handed back as it is.
// - complete and release: three-line compare-and-set scripts, fenced by the token, so a caller
//   whose lease ran out (and whose key another caller claimed since) changes nothing.
//
// Left out, against this library: fingerprints (422), principal scoping, the key's hashing, lease
// heartbeats, store timeouts, compression, encryption, steps, waiting for a duplicate, events.
const { randomBytes } = require('node:crypto');

const PENDING = '~';
const COMPLETE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`;
const RELEASE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

/** A duplicate of a call whose claim is still running (HTTP: 409). */
class FloorConflict extends Error {
  constructor(key) {
    super(`${key} is in progress`);
    this.name = 'FloorConflict';
  }
}

/** Whether `record` (a claim's answer) is a claim in progress rather than an outcome. */
const pending = (record) => record.startsWith(PENDING);

// Tokens: a random prefix per process and a counter, unique without a random draw per claim.
const PROCESS = `${PENDING}${randomBytes(6).toString('base64url')}.`;
let sequence = 0;
/** A fresh owner token. */
const token = () => `${PROCESS}${++sequence}`;

/**
 * The floor on one ioredis client. Options: `prefix` of every Redis key (default `floor:`),
 * `leaseMs` how long a claim holds its key without completing (default 30 000 ms), `ttlMs` how
 * long an outcome is kept (default 86 400 000 ms, a day).
 */
function createFloor(redis, { prefix = 'floor:', leaseMs = 30_000, ttlMs = 86_400_000 } = {}) {
  if (!redis.floorComplete) {
    redis.defineCommand('floorComplete', { numberOfKeys: 1, lua: COMPLETE });
    redis.defineCommand('floorRelease', { numberOfKeys: 1, lua: RELEASE });
  }
  const floor = {
    token,
    /** Claims `key` for `token`: null when claimed, else the record (a token, or an outcome). */
    claim: (key, token) => redis.set(prefix + key, token, 'NX', 'PX', leaseMs, 'GET'),
    pending,
    /** Stores `outcome` (a string) if `token` still owns `key`; resolves whether it did. */
    complete: async (key, token, outcome) =>
      (await redis.floorComplete(prefix + key, token, outcome, ttlMs)) === 1,
    /** Frees `key` for a retry if `token` still owns it; resolves whether it did. */
    release: async (key, token) => (await redis.floorRelease(prefix + key, token)) === 1,

    /** See run() below. */
    run: (key, fn) => run(floor, key, fn),
  };
  return floor;
}

/**
 * Runs `fn` once per `key` on `floor` (this file's, or bench/floor/floor-sql.js's): a duplicate
 * of a completed call gets its JSON result back, one of a call in progress a FloorConflict;
 * `fn`'s error releases the key and is thrown.
 */
async function run(floor, key, fn) {
  const token = floor.token();
  const record = await floor.claim(key, token);
  if (record !== null) {
    if (floor.pending(record)) throw new FloorConflict(key);
    return record === '' ? undefined : JSON.parse(record);
  }
  let value;
  try {
    value = await fn();
  } catch (error) {
    await floor.release(key, token);
    throw error;
  }
  // Fenced: a call that outlived its lease returns its value, and leaves the record alone.
  await floor.complete(key, token, JSON.stringify(value) ?? '');
  return value;
}

module.exports = { createFloor, FloorConflict, PENDING, pending, run, token };
