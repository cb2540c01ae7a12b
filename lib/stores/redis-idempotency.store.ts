import type { Cluster, Redis } from 'ioredis';
import { once } from 'node:events';
import { ClaimRequest, ClaimResult, IdempotencyStore, StoredResponse } from './idempotency.store';
import { defineIdempotencyCommands, IdempotencyCommands } from './redis-scripts';

/** Options of {@link RedisIdempotencyStore}. */
export interface RedisIdempotencyStoreOptions {
  /**
   * Whether {@link RedisIdempotencyStore.close} quits the client. Default false: a client you
   * pass in stays yours. The module sets it only for clients it created itself.
   */
  ownsClient?: boolean;
}

/** Codes returned by `lua/claim-1.lua`. */
const enum ClaimCode {
  Claimed = 1,
  InProgress = 2,
  Mismatch = 3,
  Completed = 4,
}

/**
 * The Redis store: one hash per key, every operation a single Lua script (one round trip,
 * atomic, one key, so it is Cluster-safe). Works with a single node, Sentinel and Cluster clients.
 */
export class RedisIdempotencyStore extends IdempotencyStore {
  private readonly commands: IdempotencyCommands;

  constructor(
    /** The ioredis client (`Redis` or `Cluster`). */
    readonly client: Redis | Cluster,
    private readonly options: RedisIdempotencyStoreOptions = {},
  ) {
    super();
    this.commands = defineIdempotencyCommands(client);
  }

  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const reply = (await this.commands.claim(
      key,
      request.token,
      request.fingerprint,
      request.leaseMs,
    )) as [number, number?, Buffer?, Buffer?];
    switch (reply[0]) {
      case ClaimCode.Claimed:
        return { status: 'claimed' };
      case ClaimCode.InProgress:
        return { status: 'in_progress', retryAfterMs: Math.max(Number(reply[1]), 0) };
      case ClaimCode.Mismatch:
        return { status: 'mismatch' };
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
    return (await this.commands.complete(key, token, response.meta, response.body, ttlMs)) === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    return (await this.commands.release(key, token)) === 1;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.commands.extend(key, token, leaseMs)) === 1;
  }

  override async close(): Promise<void> {
    if (!this.options.ownsClient) return;
    if (this.client.status !== 'ready') {
      // Connecting, reconnecting or never connected: nothing to flush, just stop trying.
      this.client.disconnect();
      return;
    }
    // Resolve once the connection is really gone, not when QUIT is acknowledged.
    const ended = once(this.client, 'end');
    await this.client.quit().catch(() => this.client.disconnect());
    await ended;
  }
}
