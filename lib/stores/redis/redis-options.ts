/**
 * Checks of the `redis` module option and of the Redis store's options. Loads nothing: the module
 * runs them before any client exists.
 */
import type { Cluster, Redis } from 'ioredis';
import type { IdempotencyClusterConfig } from '../../interfaces/idempotency-module-options.interface';
import { nearestName, unknownOptionProblem } from '../../options/option-names';

/** Options of `RedisIdempotencyStore`. */
export interface RedisIdempotencyStoreOptions {
  /**
   * Whether `RedisIdempotencyStore.close()` quits the client. Default false: a client you pass
   * in stays yours. The module sets it only for clients it created itself.
   */
  ownsClient?: boolean;
  /**
   * Whether the store keeps the listing index that `IdempotencyRecords.list()`, its counts, the
   * `idempotency.records` gauge, the abandoned-run reporter and the operator page read. Default
   * true. False: a first execution leaves out the index's work, an `HSET` after the claim and
   * `HDEL`, `RPUSH`, `PEXPIRE` in the completion (in `bench/redis-listing.js`, about 7 µs of
   * Redis CPU and 10 µs of app CPU per first execution: docs/stores.md), and the store has no
   * `list()`, `countRecords()` nor `markAbandoned()`: `IdempotencyRecords` answers 501 and
   * half-done runs are not reported. Set it through the module option `store`.
   */
  listing?: boolean;
}

/** Every name `RedisIdempotencyStore`'s options take: the compiler keeps the list whole. */
const STORE_OPTIONS = Object.keys({
  ownsClient: true,
  listing: true,
} satisfies Record<keyof RedisIdempotencyStoreOptions, true>);

/** Every name of `{ clusterNodes, ... }`, ours (what `clusterOptions` holds is ioredis's). */
const CLUSTER_CONFIG = Object.keys({
  clusterNodes: true,
  clusterOptions: true,
} satisfies Record<keyof IdempotencyClusterConfig, true>);

/** Why the store's constructor options are invalid, or undefined. */
export function checkRedisStoreOptions(options: RedisIdempotencyStoreOptions): string | undefined {
  const names = unknownOptionProblem(options, STORE_OPTIONS);
  if (names) return names;
  for (const name of STORE_OPTIONS) {
    const value = options[name as keyof RedisIdempotencyStoreOptions];
    if (value !== undefined && typeof value !== 'boolean') {
      return `${name} must be a boolean, got ${typeof value}`;
    }
  }
  return undefined;
}

/**
 * Why the `redis` module option is invalid (a message naming it), or undefined when it is valid:
 * a URL, an ioredis client, ioredis options or `{ clusterNodes, clusterOptions? }`.
 *
 * ioredis owns the names of its options (they differ between its releases, and it ignores those
 * it does not know), so they are not checked, except for a name that is a slip of ours: ioredis
 * options holding `clusterNodez` would connect a single node to localhost.
 */
export function checkRedisOption(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() === '' ? SHAPE : undefined;
  if (typeof value !== 'object' || value === null) return SHAPE;
  if (isRedisClient(value)) return undefined;
  if (!isClusterConfig(value)) {
    const slips = Object.keys(value).filter((name) => nearestName(name, CLUSTER_CONFIG));
    const problem = unknownOptionProblem(pick(value, slips), CLUSTER_CONFIG);
    return problem && `redis: ${problem}`;
  }
  const nodes = value.clusterNodes;
  if (!(Array.isArray(nodes) && nodes.length > 0)) {
    return 'redis.clusterNodes must be a non-empty array of nodes';
  }
  const problem = unknownOptionProblem(value, CLUSTER_CONFIG);
  return problem && `redis: ${problem}`;
}

const SHAPE = 'redis must be a Redis URL, ioredis options, { clusterNodes } or an ioredis client';

/**
 * Whether the `redis` option (an object, not a client) is `{ clusterNodes, ... }` rather than
 * ioredis options. Its own name only: one left on Object.prototype by a vulnerable deep merge
 * would make every object of ioredis options a cluster config, on the nodes it names.
 */
export function isClusterConfig(value: object): value is IdempotencyClusterConfig {
  return Object.hasOwn(value, 'clusterNodes');
}

/** Whether `value` is an ioredis client (`Redis` or `Cluster`) rather than settings for one. */
export function isRedisClient(value: unknown): value is Redis | Cluster {
  return typeof (value as { defineCommand?: unknown } | null)?.defineCommand === 'function';
}

function pick(value: object, names: string[]): object {
  return Object.fromEntries(names.map((name) => [name, (value as Record<string, unknown>)[name]]));
}
