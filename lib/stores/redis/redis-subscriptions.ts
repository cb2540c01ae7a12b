import type { Cluster, Redis } from 'ioredis';
import type { CompletedOutcome, WatchListener } from '../idempotency.store';
import { disconnect } from './redis-connection';

/** A key's watchers and the subscription that feeds them. */
interface Watch {
  listeners: Set<WatchListener>;
  subscribed: Promise<unknown>;
}

/**
 * The Redis store's watchers and the one subscriber connection that feeds them, opened on first
 * use (always the store's own, even on a borrowed client). Channels are named like the keys:
 * PUBLISH/SUBSCRIBE on a single node, sharded SPUBLISH/SSUBSCRIBE on a Cluster (the channel lives
 * on the key's shard).
 */
export class RedisSubscriptions {
  private readonly sharded: boolean;
  private subscriber?: Redis | Cluster;
  /** The subscriber's next 'ready', while it is not (see untilReady). */
  private subscriberReady?: Promise<void>;
  private readonly watches = new Map<string, Watch>();
  private closed = false;

  constructor(private readonly client: Redis | Cluster) {
    this.sharded = client.isCluster;
  }

  /** See `RedisIdempotencyStore.watch`. */
  async watch(key: string, listener: WatchListener): Promise<() => void> {
    // A subscriber opened now would never be closed.
    if (this.closed) throw new Error('the idempotency store is closed');
    // ioredis prefixes KEYS, so the scripts publish to the prefixed name.
    const channel = (this.client.options.keyPrefix ?? '') + key;
    let watch = this.watches.get(channel);
    if (!watch) {
      const subscriber = this.getSubscriber();
      // ioredis prefixes sharded channels itself (they name keys), plain channels it does not.
      const subscribed = this.untilReady(subscriber).then(() =>
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

  /** Forgets every watcher and closes the subscriber; no watch() succeeds after it. */
  async close(): Promise<void> {
    this.closed = true;
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.subscriberReady = undefined;
    this.watches.clear();
    if (subscriber) await disconnect(subscriber);
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
  private untilReady(subscriber: Redis | Cluster): Promise<void> {
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

/** The response a completion message carries (see lua/complete-5.lua); undefined for any other. */
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
