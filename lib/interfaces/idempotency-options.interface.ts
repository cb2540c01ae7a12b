import type { ExecutionContext } from '@nestjs/common';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { IdempotencyStore } from '../stores/idempotency.store';
import type { IdempotencyEvent } from './idempotency-event.interface';

/**
 * Options that apply per route. Set them module-wide in `forRoot()` and override any of them on a
 * controller or handler with `@Idempotent({...})` (method beats class beats module).
 */
export interface IdempotencyOptions {
  /** Request header that carries the key. Default: `'Idempotency-Key'`. */
  headerName?: string;
  /** How long a completed response is kept and replayed, in milliseconds. Default: 86 400 000 (24 h). */
  ttl?: number;
  /**
   * The in-progress lease, in milliseconds. While the handler runs, the lease is renewed every
   * third of it (heartbeat); if the process dies, the key becomes claimable again after at most
   * this long. Default: 30 000 (30 s).
   */
  lockTtl?: number;
  /** Reject requests without a key with 400 instead of running them unprotected. Default: false. */
  required?: boolean;
  /**
   * Compare a hash of the request (method, URL and canonical JSON body) and answer 422 when the
   * same key comes with another request. Default: true.
   */
  fingerprint?: boolean;
  /**
   * When the store fails or times out before the claim: `false` answers 503 and runs nothing
   * (fail closed); `true` runs the handler unprotected and logs a warning. Default: false.
   */
  failOpen?: boolean;
  /**
   * Reads the key from the request instead of the header; return `undefined` for none. The value
   * is validated like a header value.
   */
  key?: (context: ExecutionContext) => string | undefined;
  /**
   * Adds a tenant or principal to the record's scope, so that two tenants using the same key never
   * see each other's responses. Records are always scoped per handler (controller + method).
   */
  scope?: (context: ExecutionContext) => string | undefined;
  /**
   * Called when a request is answered from the store without running the handler (a replay, or
   * a duplicate event skipped). Acknowledge manual-ack broker messages here (RabbitMQ with
   * `noAck: false`), since the handler that would have acked them does not run.
   */
  onReplay?: (context: ExecutionContext) => void;
  /** Response headers stored and replayed (case-insensitive). Default: {@link DEFAULT_REPLAY_HEADERS}. */
  replayHeaders?: string[];
  /**
   * Largest response body stored, in bytes. A larger response is sent but not stored (the claim is
   * released and a warning logged). Default: 1 048 576 (1 MiB).
   */
  maxResponseBytes?: number;
  /** Longest accepted key, in characters. Default: 255. */
  maxKeyLength?: number;
  /** Prefix of every store key. Default: `'idempotency:'`. */
  keyPrefix?: string;
  /**
   * Longest wait for one store call, in milliseconds. A claim that times out fails closed (503);
   * a completion that times out is logged. Default: 2 000.
   */
  storeTimeout?: number;
}

/** Connection settings for a Redis Cluster the module creates itself. */
export interface IdempotencyClusterConfig {
  /** Seed nodes of the cluster. */
  clusterNodes: ClusterNode[];
  /** ioredis Cluster options. */
  clusterOptions?: ClusterOptions;
}

/** Options of `IdempotencyModule.forRoot()` / `forRootAsync()`. */
export interface IdempotencyModuleOptions extends IdempotencyOptions {
  /**
   * Redis to use: an ioredis `Redis` or `Cluster` instance (yours; the module never closes it),
   * a `redis://` URL, ioredis options (including Sentinel), or `{ clusterNodes }`. Clients created
   * from a URL or options are closed on application shutdown.
   */
  redis?: Redis | Cluster | string | RedisOptions | IdempotencyClusterConfig;
  /** Any store implementation; takes precedence over `redis`. Never closed by the module. */
  store?: IdempotencyStore;
  /** Receives every outcome (claimed, replayed, conflict, ...); keys are hashed, never raw. */
  onEvent?: (event: IdempotencyEvent) => void;
}

/** Extra `forRoot()` / `forRootAsync()` settings that shape the module itself. */
export interface IdempotencyModuleExtras {
  /** Register the module globally. Default: true. */
  isGlobal?: boolean;
  /**
   * Register {@link IdempotencyInterceptor} as a global `APP_INTERCEPTOR`. Set false to register
   * your own subclass (or bind it per controller with `@UseInterceptors`). Default: true.
   */
  globalInterceptor?: boolean;
}

type OptionalHooks = 'key' | 'scope' | 'onReplay';

/** Route options with every default filled in. */
export type ResolvedIdempotencyOptions = Required<Omit<IdempotencyOptions, OptionalHooks>> &
  Pick<IdempotencyOptions, OptionalHooks> &
  Pick<IdempotencyModuleOptions, 'onEvent'>;
