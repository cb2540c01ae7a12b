import type { Redis } from 'ioredis';

/** A record as lua/claim-2.lua documents it (a MessagePack sequence in one string). */
export type StoredRecord =
  | { state: 'p'; fingerprint: string; owner: string; waiting: number }
  | { state: 'c'; fingerprint: string; meta: string; body: Buffer };

/** Reads and unpacks a record with Redis's own cmsgpack, as the scripts do. */
export async function readRecord(client: Redis, key: string): Promise<StoredRecord | undefined> {
  const fields = (await client.callBuffer(
    'EVAL',
    "local v = redis.call('GET', KEYS[1]); if not v then return nil end; return {cmsgpack.unpack(v)}",
    1,
    key,
  )) as (Buffer | number)[] | null;
  if (!fields) return undefined;
  const [state, fingerprint, third, fourth] = fields;
  return String(state) === 'p'
    ? {
        state: 'p',
        fingerprint: String(fingerprint),
        owner: String(third),
        waiting: Number(fourth),
      }
    : { state: 'c', fingerprint: String(fingerprint), meta: String(third), body: fourth as Buffer };
}

/** Rewrites a completed record's meta in place, keeping its TTL (to simulate tampering). */
export async function rewriteMeta(client: Redis, key: string, meta: string): Promise<void> {
  await client.eval(
    "local s, f, _, b = cmsgpack.unpack(redis.call('GET', KEYS[1])); " +
      "return redis.call('SET', KEYS[1], cmsgpack.pack(s, f, ARGV[1], b), 'KEEPTTL')",
    1,
    key,
    meta,
  );
}
