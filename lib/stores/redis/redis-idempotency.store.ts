import type { Cluster, Redis } from 'ioredis';
import { isUtf8 } from 'node:buffer';
import { once } from 'node:events';
import {
  ClaimRequest,
  ClaimResult,
  CompletedOutcome,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  WatchListener,
} from '../idempotency.store';
import { withTimeout } from '../../utils/timeout';
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
  KeyReused = 3,
  Completed = 4,
}

/** Codes returned by `lua/inspect-1.lua`. */
const enum InspectCode {
  Absent = 0,
  Pending = 1,
  Completed = 2,
}

/** A key's watchers and the subscription that feeds them. */
interface Watch {
  listeners: Set<WatchListener>;
  subscribed: Promise<unknown>;
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
  private readonly commands: IdempotencyCommands;
  private readonly sharded: boolean;
  private subscriber?: Redis | Cluster;
  /** The subscriber's next 'ready', while it is not (see whenReady). */
  private subscriberReady?: Promise<void>;
  private readonly watches = new Map<string, Watch>();
  private closed = false;

  constructor(
    /** The ioredis client (`Redis` or `Cluster`). */
    readonly client: Redis | Cluster,
    private readonly options: RedisIdempotencyStoreOptions = {},
  ) {
    super();
    this.commands = defineIdempotencyCommands(client);
    this.sharded = client.isCluster;
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

  override async watch(key: string, listener: WatchListener): Promise<() => void> {
    // A subscriber opened now would never be closed.
    if (this.closed) throw new Error('the idempotency store is closed');
    // ioredis prefixes KEYS, so the scripts publish to the prefixed name.
    const channel = (this.client.options.keyPrefix ?? '') + key;
    let watch = this.watches.get(channel);
    if (!watch) {
      const subscriber = this.getSubscriber();
      // ioredis prefixes sharded channels itself (they name keys), plain channels it does not.
      const subscribed = this.whenReady(subscriber).then(() =>
        this.sharded ? subscriber.ssubscribe(key) : subscriber.subscribe(channel),
      );
      watch = { listeners: new Set(), subscribed };
      this.watches.set(channel, watch);
      subscribed.catch(() => this.unwatch(channel, watch!));
    }
    watch.listeners.add(listener);
    await watch.subscribed;
    return () => {
      watch.listeners.delete(listener);
      if (watch.listeners.size === 0) this.unwatch(channel, watch);
    };
  }

  override async close(): Promise<void> {
    this.closed = true;
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.subscriberReady = undefined;
    this.watches.clear();
    // The subscriber is always ours, even on a borrowed client.
    await Promise.all([
      subscriber && disconnect(subscriber),
      this.options.ownsClient && disconnect(this.client),
    ]);
  }

  /** 'PUBLISH', or on a Cluster 'SPUBLISH' (the channel stays on the key's shard). */
  private get publish(): string {
    return this.sharded ? 'SPUBLISH' : 'PUBLISH';
  }

  private getSubscriber(): Redis | Cluster {
    if (this.subscriber) return this.subscriber;
    // Queue while connecting: watch() is bounded by the caller's storeTimeout.
    const subscriber = this.sharded
      ? (this.client as Cluster).duplicate([], {
          shardedSubscribers: true,
          enableOfflineQueue: true,
        })
      : (this.client as Redis).duplicate({ enableOfflineQueue: true });
    const notify = (channel: Buffer, message: Buffer) => {
      const watch = this.watches.get(channel.toString());
      if (!watch) return;
      const completed = parseCompletion(message);
      watch.listeners.forEach((listener) => listener(completed));
    };
    subscriber.on(this.sharded ? 'smessageBuffer' : 'messageBuffer', notify);
    // Errors surface as failed watch() calls; ioredis reconnects and resubscribes on its own.
    subscriber.on('error', () => {});
    return (this.subscriber = subscriber);
  }

  /**
   * Resolves once the subscriber is ready. Recent ioredis 5 releases (5.11; not 5.6) send a
   * SUBSCRIBE made while they connect ahead of their ready check: the connection is then in
   * subscriber mode, the check (INFO) is refused, and the pending subscriptions fail with it.
   * The caller's storeTimeout bounds the wait.
   */
  private whenReady(subscriber: Redis | Cluster): Promise<void> {
    if (subscriber.status === 'ready') return Promise.resolve();
    return (this.subscriberReady ??= new Promise<void>((resolve) =>
      subscriber.once('ready', () => {
        this.subscriberReady = undefined;
        resolve();
      }),
    ));
  }

  private unwatch(channel: string, watch: Watch): void {
    if (this.watches.get(channel) !== watch) return;
    this.watches.delete(channel);
    const subscriber = this.subscriber;
    if (!subscriber) return;
    const prefix = this.client.options.keyPrefix ?? '';
    const done = this.sharded
      ? subscriber.sunsubscribe(channel.slice(prefix.length))
      : subscriber.unsubscribe(channel);
    done.catch(() => {});
  }
}

/** Header of a completion message: 'c', uint16 fingerprint length, uint32 meta length. */
const COMPLETION_HEADER = 7;

/** The response a completion message carries (see lua/complete-1.lua); undefined for any other. */
function parseCompletion(message: Buffer): CompletedOutcome | undefined {
  if (message.length < COMPLETION_HEADER || message[0] !== 0x63) return undefined;
  const metaStart = COMPLETION_HEADER + message.readUInt16BE(1);
  const bodyStart = metaStart + message.readUInt32BE(3);
  if (bodyStart > message.length) return undefined;
  return {
    fingerprint: message.toString('utf8', COMPLETION_HEADER, metaStart),
    response: {
      meta: message.toString('utf8', metaStart, bodyStart),
      body: message.subarray(bodyStart),
    },
  };
}

/** How long a shutdown waits for Redis to acknowledge QUIT before dropping the connection, in ms. */
const QUIT_TIMEOUT_MS = 2_000;

/**
 * Closes a connection, resolving once it is really gone (not when QUIT is acknowledged), or after
 * {@link QUIT_TIMEOUT_MS} when Redis does not answer (stalled, partitioned): a shutdown must end.
 */
async function disconnect(client: Redis | Cluster): Promise<void> {
  if (client.status !== 'ready') {
    // Connecting, reconnecting or never connected: nothing to flush, just stop trying.
    client.disconnect();
    return;
  }
  // An error while closing ends the wait as well (once() rejects on 'error'): never unhandled.
  const ended = once(client, 'end').catch(() => undefined);
  const quit = client.quit().then(
    () => ended,
    () => client.disconnect(),
  );
  await withTimeout(quit, QUIT_TIMEOUT_MS, () => new Error('QUIT timed out')).catch(() =>
    client.disconnect(),
  );
}
