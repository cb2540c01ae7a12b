import type { ExecutionContext } from '@nestjs/common';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { IdempotencyError } from '../errors/idempotency.errors';
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
   * Reads the key from the request instead of the header; return `undefined` for none. A string
   * is taken as it is (printable ASCII, trimmed, 1 to `maxKeyLength` characters; not parsed as a
   * structured header), an integer (a number up to 2^53 - 1, or a bigint) as its decimal form.
   */
  key?: (context: ExecutionContext) => string | number | bigint | undefined;
  /**
   * Who a record belongs to, beside its route. By default an HTTP request with an authenticated
   * principal (`request.user`, set by Passport or your guard) is scoped to it: the first of
   * `id`, `sub`, `userId`, `_id` that is a string or number (never a token or `iat`/`exp`, so a
   * retry after a token refresh still replays). A principal with none of them fails the request
   * (500, logged) rather than sharing its records. A request with no principal shares records
   * with every other caller of the route, and the route logs one warning.
   *
   * A function replaces that default: it returns the caller's tenant or account id (records with
   * another value are never seen; `1` and `'1'` differ), or `undefined` / `null` for none, and
   * then the principal applies as without the option. `'public'` opts a route out
   * explicitly, for genuinely public endpoints: records are shared by every caller, no warning.
   * Microservice handlers have no principal: use a function to scope them.
   */
  scope?: ((context: ExecutionContext) => string | undefined) | 'public';
  /**
   * Called when a request is answered from the store without running the handler (a replay, or
   * a duplicate event skipped). Acknowledge manual-ack broker messages here (RabbitMQ with
   * `noAck: false`), since the handler that would have acked them does not run.
   */
  onReplay?: (context: ExecutionContext) => void;
  /**
   * Called when a request is refused without running the handler: no key with `required`, an
   * invalid or reused key, a duplicate still in progress, the store unavailable. The error says
   * which (`code`) and whether a redelivery may succeed (`retryable`). Settle manual-ack broker
   * messages here (RabbitMQ: `nack` with requeue when retryable, else without), or they stay
   * unacked: see {@link rmqManualAck}. Called before the error reaches the transport; an error
   * it throws is logged, never replaces that error.
   */
  onReject?: (context: ExecutionContext, error: IdempotencyError) => void;
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
  /**
   * What a duplicate gets while the first request with its key is still running: `'reject'`
   * answers 409 with Retry-After; `'wait'` holds the duplicate until the first one finishes and
   * then replays its response (or, if it failed or its process died, runs the handler itself).
   * The store notifies waiters (Redis pub/sub, sharded on a Cluster; in process for the memory
   * store); nothing polls. Default: `'wait'` on `@EventPattern` handlers (an event refused as in
   * progress is lost on a broker that acks on delivery, should the first attempt fail), `'reject'`
   * everywhere else.
   */
  onConflict?: 'reject' | 'wait';
  /**
   * Longest a duplicate waits with `onConflict: 'wait'`, in milliseconds, before it is refused as
   * in progress. Default: 10 000; on `@EventPattern` handlers, no limit: a duplicate event waits
   * until the first completes (skipped), fails or its lease runs out (then it runs).
   */
  waitTimeout?: number;
  /**
   * Compresses stored bodies of at least `threshold` bytes with node:zlib; replays decompress
   * them transparently. `false` stores bodies as they are. Default: brotli (quality 5) from 1 KiB.
   */
  compression?: false | IdempotencyCompressionOptions;
  /**
   * HTTP error bodies as RFC 9457 problem details (`application/problem+json` with `type`,
   * `title`, `status`, `detail`, `code`) instead of Nest's `{ statusCode, error, message }`.
   * `true` uses this package's documentation as the `type` base. Default: false.
   */
  problemDetails?: boolean | { typeBaseUri: string };
}

/** How stored bodies are compressed (option `compression`). */
export interface IdempotencyCompressionOptions {
  /** Algorithm from node:zlib. Default: `'brotli'`. */
  algorithm?: 'brotli' | 'gzip' | 'deflate';
  /** Smallest body compressed, in bytes; smaller ones are stored as they are. Default: 1 024. */
  threshold?: number;
  /** Compression level: brotli quality 0-11, gzip/deflate level 1-9. Default: 5 (brotli), 6 (gzip, deflate). */
  level?: number;
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
  /**
   * Record OpenTelemetry metrics (a counter per outcome, a histogram of store latency) through
   * `@opentelemetry/api` when that package is installed; without an SDK they cost next to
   * nothing. Default: true.
   */
  metrics?: boolean;
}

/** Extra `forRoot()` / `forRootAsync()` settings that shape the module itself. */
export interface IdempotencyModuleExtras {
  /** Register the module globally. Default: true. */
  isGlobal?: boolean;
  /**
   * Also register {@link IdempotencyInterceptor} as a global `APP_INTERCEPTOR`. Not needed:
   * `@Idempotent()` binds it to its routes, and routes without it then skip Nest's interceptor
   * pipeline. Set it only for a subclass that makes routes idempotent through `getRouteOptions()`
   * without the decorator, at the cost of that pipeline on every route (or register the subclass
   * yourself as `APP_INTERCEPTOR`). A request is claimed once either way. Default: false.
   */
  globalInterceptor?: boolean;
}

type OptionalHooks = 'key' | 'scope' | 'onReplay' | 'onReject';

/** Route options with every default filled in. */
export type ResolvedIdempotencyOptions = Required<Omit<IdempotencyOptions, OptionalHooks>> &
  Pick<IdempotencyOptions, OptionalHooks> &
  Pick<IdempotencyModuleOptions, 'onEvent'>;
