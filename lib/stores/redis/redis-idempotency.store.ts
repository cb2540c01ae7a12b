import type { Cluster, Redis } from 'ioredis';
import { isUtf8 } from 'node:buffer';
import {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  WatchListener,
} from '../idempotency.store';
import { clientReady, disconnect } from './redis-connection';
import { evictingPolicy, evictionWarning } from './redis-eviction';
import { defineIdempotencyCommands, IdempotencyCommands } from './redis-scripts';
import { checkRedisStoreOptions, type RedisIdempotencyStoreOptions } from './redis-options';
import { RedisSubscriptions } from './redis-subscriptions';

export type { RedisIdempotencyStoreOptions } from './redis-options';

/** Codes returned by `lua/claim-1.lua`. */
const enum ClaimCode {
  Claimed = 1,
  InProgress = 2,
  KeyReused = 3,
  Completed = 4,
}

/** Codes returned by `lua/inspect-1.lua`. */
const enum InspectCode {
  Absent = 0,
  Pending = 1,
  Completed = 2,
}

/**
 * The Redis store: one string per key, every operation a single Lua script (one round trip,
 * atomic, one key, so it is Cluster-safe). Works with a single node, Sentinel and Cluster clients.
 *
 * Waiting duplicates (`onConflict: 'wait'`) are notified through pub/sub on a channel named like
 * the key: PUBLISH/SUBSCRIBE on a single node, sharded SPUBLISH/SSUBSCRIBE on a Cluster (the
 * channel lives on the key's shard). One subscriber connection per store, opened on first use.
 */
export class RedisIdempotencyStore extends IdempotencyStore {
  /** `'Redis'`, in log lines. */
  override readonly displayName = 'Redis';
  private readonly commands: IdempotencyCommands;
  private readonly subscriptions: RedisSubscriptions;
  /** 'PUBLISH', or on a Cluster 'SPUBLISH' (the channel stays on the key's shard). */
  private readonly publish: 'PUBLISH' | 'SPUBLISH';

  constructor(
    /** The ioredis client (`Redis` or `Cluster`). */
    readonly client: Redis | Cluster,
    private readonly options: RedisIdempotencyStoreOptions = {},
  ) {
    super();
    const problem = checkRedisStoreOptions(options);
    if (problem) throw new TypeError(`RedisIdempotencyStore: ${problem}`);
    this.commands = defineIdempotencyCommands(client);
    this.subscriptions = new RedisSubscriptions(client);
    this.publish = client.isCluster ? 'SPUBLISH' : 'PUBLISH';
  }

  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const reply = (await this.commands.claim(
      key,
      request.token,
      request.fingerprint,
      request.leaseMs,
      request.waiting ? '1' : '0',
    )) as [number, number?, Buffer?, Buffer?];
    switch (reply[0]) {
      case ClaimCode.Claimed:
        return { status: 'claimed' };
      case ClaimCode.InProgress:
        return { status: 'in_progress', retryAfterMs: Math.max(Number(reply[1]), 0) };
      case ClaimCode.KeyReused:
        return { status: 'key_reused' };
      case ClaimCode.Completed:
        return {
          status: 'completed',
          response: { meta: String(reply[2] ?? ''), body: reply[3] ?? Buffer.alloc(0) },
        };
      default:
        throw new Error(`Unexpected reply from the idempotency claim script: ${String(reply[0])}`);
    }
  }

  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
  ): Promise<boolean> {
    const { meta, body } = response;
    // The same bytes as a string when they are UTF-8 (JSON and text are): ioredis writes a command
    // of strings as one string, while a Buffer argument makes it copy the whole batch into a Buffer.
    const value = isUtf8(body) ? body.toString('utf8') : body;
    return (await this.commands.complete(key, token, meta, value, ttlMs, this.publish)) === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    return (await this.commands.release(key, token, this.publish)) === 1;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.commands.extend(key, token, leaseMs)) === 1;
  }

  override async inspect(key: string): Promise<RecordInspection> {
    const [code, second, bytes, ageMs, ttlMsLeft] = (await this.commands.inspect(key)) as [
      number,
      (number | Buffer)?,
      number?,
      number?,
      number?,
    ];
    switch (code) {
      case InspectCode.Absent:
        return { state: 'absent' };
      case InspectCode.Pending:
        return { state: 'pending', leaseMsLeft: Number(second) };
      case InspectCode.Completed:
        return {
          state: 'completed',
          meta: String(second),
          bytes: Number(bytes),
          ageMs: Number(ageMs),
          ttlMsLeft: Number(ttlMsLeft),
        };
      default:
        throw new Error(`Unexpected reply from the idempotency inspect script: ${String(code)}`);
    }
  }

  override async delete(key: string): Promise<boolean> {
    return (await this.commands.delete(key, this.publish)) === 1;
  }

  /**
   * Calls `listener` when the record at `key` is completed (with the stored response), released
   * or deleted, through pub/sub on a channel named like the key.
   */
  override watch(key: string, listener: WatchListener): Promise<() => void> {
    return this.subscriptions.watch(key, listener);
  }

  /** Quits the subscriber, and the client if the store owns it. */
  override async close(): Promise<void> {
    await Promise.all([
      this.subscriptions.close(),
      this.options.ownsClient && disconnect(this.client),
    ]);
  }

  /**
   * Resolves true once the client is ready, or at once when it waits for its first command (a
   * client of yours with `lazyConnect`: nothing to wait for); false after `timeoutMs`.
   */
  override whenReady(timeoutMs: number): Promise<boolean> {
    return clientReady(this.client, timeoutMs);
  }

  /**
   * The eviction warning when Redis may evict records (any `maxmemory-policy` but `noeviction`),
   * since an evicted claim or record lets a duplicate run the handler again. Only on a connected
   * client (never connecting one of yours that is lazy); nothing where `CONFIG` is disabled.
   */
  override async bootWarnings(): Promise<string[]> {
    if (this.client.status !== 'ready') return [];
    const policy = await evictingPolicy(this.client);
    return policy === undefined ? [] : [evictionWarning(policy)];
  }

  /** `evictionPolicy` and `warning` when Redis may evict records (see bootWarnings). */
  override async healthDetails(): Promise<Record<string, unknown> | undefined> {
    const policy = await evictingPolicy(this.client);
    return policy === undefined
      ? undefined
      : { evictionPolicy: policy, warning: evictionWarning(policy) };
  }
}
