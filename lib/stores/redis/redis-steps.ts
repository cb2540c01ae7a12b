/**
 * The Redis store's steps (recovery points of resumable runs): the key of a record's steps hash
 * and what the scripts that read it reply. The hash's fields are described in `lua/claim-5.lua`.
 */
import type { Cluster, Redis } from 'ioredis';
import type { RecordedStep, StoredStep } from '../idempotency.store';

/**
 * The key of the steps recorded under `key`: the record key and `:steps`. A record key built by
 * the module carries a `{hash tag}`, so both keys map to one Cluster slot and one script can
 * touch both. Undefined on a Cluster for a key whose slot the suffix would change (no hash tag,
 * in the key or in the client's `keyPrefix`): such a key has no steps.
 */
export function stepsKey(client: Redis | Cluster, key: string): string | undefined {
  if (!client.isCluster || hasHashTag((client.options.keyPrefix ?? '') + key)) {
    return `${key}:steps`;
  }
  return undefined;
}

/** Why a resumable call on a Cluster cannot use `key`: its steps would live on another slot. */
export function noHashTag(key: string): Error {
  return new Error(
    `RedisIdempotencyStore: on a Redis Cluster, steps need a record key with a {hash tag}, so ` +
      `that the record and its steps share a slot (keys the module builds have one): ${key}`,
  );
}

/**
 * Whether Redis Cluster hashes `key` by a tag: a `{` followed, later, by a `}` with something
 * between them (the first such pair counts).
 */
function hasHashTag(key: string): boolean {
  const open = key.indexOf('{');
  if (open < 0) return false;
  const close = key.indexOf('}', open + 1);
  return close > open + 1;
}

/**
 * The steps in a steps hash as HGETALL returns it (field, value, ...), in index order. The
 * fingerprint field (`f`) is the script's business, not the caller's.
 */
export function decodeSteps(flat: Buffer[] | undefined): StoredStep[] | undefined {
  if (!flat || flat.length === 0) return undefined;
  const byIndex = new Map<number, { name?: string; meta?: string; body?: Buffer }>();
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const field = flat[i].toString();
    const colon = field.indexOf(':');
    if (colon !== 1) continue;
    const index = Number(field.slice(2));
    let step = byIndex.get(index);
    if (!step) byIndex.set(index, (step = {}));
    const value = flat[i + 1];
    if (field[0] === 'n') step.name = value.toString();
    else if (field[0] === 'm') step.meta = value.toString();
    else if (field[0] === 'b') step.body = value;
  }
  const steps: StoredStep[] = [];
  for (const [index, { name, meta, body }] of byIndex) {
    // Written by one HSET: a step missing a part is no step of ours.
    if (name === undefined || meta === undefined || body === undefined) continue;
    steps.push({ index, name, result: { meta, body } });
  }
  return steps.sort((a, b) => a.index - b.index);
}

/** Steps as `lua/inspect-2.lua` replies them (index, name, ...), in index order. */
export function decodeStepNames(flat: (Buffer | number)[] | undefined): RecordedStep[] {
  const steps: RecordedStep[] = [];
  for (let i = 0; flat && i + 1 < flat.length; i += 2) {
    steps.push({ index: Number(String(flat[i])), name: String(flat[i + 1]) });
  }
  return steps.sort((a, b) => a.index - b.index);
}
