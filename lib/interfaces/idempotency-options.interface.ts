import type { ExecutionContext } from '@nestjs/common';
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { Pool } from 'pg';
import type { IdempotencyError } from '../errors/idempotency.errors';
import type { IdempotencyStore } from '../stores/idempotency.store';
import type { IdempotencyPostgresConfig } from '../stores/postgres/postgres-idempotency.store';
import type { IdempotencyMysqlConfig } from '../stores/mysql/mysql-options';
import type { Pool as MysqlPool } from 'mysql2';
import type { Pool as MysqlPromisePool } from 'mysql2/promise';
import type { IdempotencyEvent } from './idempotency-event.interface';

/**
 * Options that apply per route. Set them module-wide in `forRoot()` and override any of them on a
 * controller or handler with `@Idempotent({...})` (method beats class beats module).
 */
export interface IdempotencyOptions {
  /**
   * `false` turns idempotency off where it is set: `@Idempotent(false)` (or
   * `@Idempotent({ enabled: false })`) on a handler of an `@Idempotent()` controller runs that
   * handler untouched; `forRoot({ enabled: false })` turns it off everywhere a route does not set
   * it back. Default: true.
   */
  enabled?: boolean;
  /** Request header that carries the key. Default: `'Idempotency-Key'`. */
  headerName?: string;
  /**
   * How long a completed response is kept and replayed: milliseconds, or a duration string
   * (`'24h'`, see {@link IdempotencyDuration}). Default: 86 400 000 (24 h).
   */
  ttl?: IdempotencyDuration;
  /**
   * The in-progress lease, in milliseconds or a duration string (`'30s'`). While the handler runs, the lease is renewed every
   * third of it (heartbeat); if the process dies, the key becomes claimable again after at most
   * this long. Default: 30 000 (30 s).
   */
  lockTtl?: IdempotencyDuration;
  /**
   * The longest a handler holds its key, in milliseconds (or a duration string such as `'1h'`), counted from the claim. Past it the
   * heartbeat stops renewing the lease, which then runs out within `lockTtl`: a retry runs the
   * handler again, and the stuck run's late outcome is refused (fenced), never stored. Bounds how
   * long a handler hung on a dead socket blocks its key with 409. Set it above the longest run
   * you expect. Default: 3 600 000 (1 h).
   */
  maxLockHold?: IdempotencyDuration;
  /** Reject requests without a key with 400 instead of running them unprotected. Default: false. */
  required?: boolean;
  /**
   * Compare a hash of the request and answer 422 when the same key comes with another request.
   * `true` hashes the method, the URL and the canonical JSON body (RPC: the pattern and the
   * payload). A function replaces that: it returns what identifies the request (a value of any
   * JSON-like shape, e.g. some body fields or a header; sync or async), which is hashed the same
   * way. In a {@link keySpace} the method and path are hashed with it. If it throws, the request
   * is refused with 400 (`IDEMPOTENCY_KEY_INVALID`) and nothing runs. `false` skips the check.
   * Default: true.
   */
  fingerprint?: boolean | IdempotencyFingerprintFn;
  /**
   * When the store fails or times out before the claim: `false` answers 503 and runs nothing
   * (fail closed); `true` runs the handler unprotected and logs a warning. Default: false.
   */
  failOpen?: boolean;
  /**
   * Reads the key from the request instead of the header (sync or async); return `undefined` for
   * none. A string is taken as it is (printable ASCII, trimmed, 1 to `maxKeyLength` characters;
   * not parsed as a structured header), an integer (a number up to 2^53 - 1, or a bigint) as its
   * decimal form. If it throws (or rejects), the request is refused with 400
   * (`IDEMPOTENCY_KEY_INVALID`) and nothing runs.
   */
  key?: (context: ExecutionContext) => IdempotencyKeyValue | Promise<IdempotencyKeyValue>;
  /**
   * Shares keys between routes: every route with the same `keySpace` name looks a key up in one
   * place, so a key names one client operation across endpoints (as payment APIs do). A key used
   * on one of them and sent to another gets 422: the fingerprint then covers the method and the
   * path as well (also with a fingerprint function, or `fingerprint: false`). Records stay
   * scoped to the caller (`scope`). Default: none: each route has its own keys.
   */
  keySpace?: string;
  /**
   * Who a record belongs to, beside its route. By default an HTTP request with an authenticated
   * principal (`request.user`, set by Passport or your guard) is scoped to it: the first of
   * `id`, `sub`, `userId`, `_id` that is a string or number (never a token or `iat`/`exp`, so a
   * retry after a token refresh still replays). A principal with none of them fails the request
   * (500, logged) rather than sharing its records. A request with no principal shares records
   * with every other caller of the route, and the route logs one warning.
   *
   * A function replaces that default (sync or async): it returns the caller's tenant or account
   * id, a non-empty string or a number (records with another value are never seen; `1` and `'1'`
   * differ), or an object identified like a principal (by its `id`, `sub`, `userId` or `_id`),
   * or `undefined` / `null` for none, and then the principal applies as without the option.
   * Anything else (an empty string, an object without an id) fails the request (500, logged).
   * `'public'` opts a route out explicitly, for genuinely public endpoints: records are shared by
   * every caller, no warning. Microservice handlers have no principal: use a function to scope
   * them.
   */
  scope?: ((context: ExecutionContext) => unknown) | 'public';
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
  /**
   * Store and replay these errors of the handler, instead of releasing the claim: a retry then
   * gets the same error again and the handler does not run (a declined card is not charged on
   * retry). Each entry matches by HTTP status (`402`, or a class such as `'4xx'`), by exception
   * class (`instanceof`), or by a predicate `(error, context) => boolean`. A replayed error has
   * the status, body and allowlisted headers of the first one, and `Idempotent-Replayed: true`;
   * it is rethrown as an `HttpException` (RPC: `RpcException`) with the stored body, of the
   * listed class when one is listed, so exception filters answer as the first time. Errors that
   * are not `HttpException`s are stored as status 500 with their class and message only; a
   * timeout (`RequestTimeoutException`, rxjs `TimeoutError`) is never stored. Default: `[]`
   * (every error releases the claim, so a retry runs the handler again).
   */
  storeErrors?: IdempotencyErrorMatcher[];
  /**
   * Runs the handler inside a database transaction and writes the completion in that same
   * transaction, so that the handler's writes and its idempotency record commit together, or
   * not at all: a crash before the commit leaves neither, and the retry runs once. The
   * transaction is opened through the app's `TransactionHost` (`@nestjs-cls/transactional`,
   * registered with `ClsPluginTransactional`; `{ connectionName }` picks a named one); write
   * through it (`txHost.tx`, `@Transactional()` services) in the handler. A completion refused
   * because the request lost its lease (fenced) rolls the transaction back, and the client gets
   * 409 (a retry replays the winner's response). Needs a store that can write inside the app's
   * transaction: the PostgreSQL or MySQL store, on the database the app writes to. Default: false.
   */
  transactional?: boolean | { connectionName?: string };
  /**
   * Adds a header saying what happened to each keyed request, so that clients and proxies can
   * tell outcomes apart without parsing bodies: `first-run`, `replayed`, `in-progress` (409),
   * `key-reused` (422), `key-missing` / `key-invalid` (400), `store-unavailable` (503),
   * `record-unreadable` (500). `true` names it `Idempotency-Status`; a string names it. HTTP
   * only. Default: false.
   */
  statusHeader?: boolean | string;
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
   * Longest wait for one store call, in milliseconds or a duration string (`'2s'`). A claim that times out fails closed (503);
   * a completion that times out is logged. Default: 2 000.
   */
  storeTimeout?: IdempotencyDuration;
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
   * Longest a duplicate waits with `onConflict: 'wait'`, in milliseconds or a duration string
   * (`'10s'`), before it is refused as
   * in progress. Default: 10 000; on `@EventPattern` handlers, no limit: a duplicate event waits
   * until the first completes (skipped), fails or its lease runs out (then it runs).
   */
  waitTimeout?: IdempotencyDuration;
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
  /**
   * Sends a key derived from this request's record with every non-safe outbound call the
   * handler makes (global `fetch`, `@nestjs/axios` HttpService, `ClientProxy.send`/`emit`), so a
   * re-run after a crash calls a provider or service that deduplicates by `Idempotency-Key`
   * with the same key as the first run, and is not charged twice. A call that sets its own key
   * keeps it. The key is `derivedIdempotencyKey('<METHOD> <origin><path>')` for HTTP
   * (`send <pattern>` / `emit <pattern>` for messages), with ` #2`, ` #3`... from the second call
   * to the same endpoint in one run. Needs the module's `keyDerivationSecret`. See
   * docs/propagation.md. Default: false.
   */
  propagateKeys?: boolean;
  /**
   * Each `IdempotencyService.step()` of the handler runs once per request and is recorded: a re-run
   * (after a failure, a crash, a lease taken over) resumes after the last recorded step. With
   * `transactional`, one transaction per step. Needs a store with `recordStep` (checked at boot).
   * See docs/steps.md. Default: false.
   */
  resumable?: boolean;
}

/**
 * A duration: milliseconds (a number), or a string of a number and a unit: `'500ms'`, `'30s'`,
 * `'2m'`, `'24h'`, `'1d'` (fractions allowed: `'1.5s'`; digits alone are milliseconds, as
 * environment variables give them). Any other string fails boot, naming the option.
 */
export type IdempotencyDuration = number | string;

/** Options that take an {@link IdempotencyDuration}; resolved to milliseconds at boot. */
export type IdempotencyDurationOption =
  'ttl' | 'lockTtl' | 'storeTimeout' | 'waitTimeout' | 'maxLockHold';

/** What a `key` function returns: a key, or `undefined` (or `null`) for none. */
export type IdempotencyKeyValue = string | number | bigint | undefined | null;

/** A custom fingerprint (option `fingerprint`): what identifies the request, hashed by the library. */
export type IdempotencyFingerprintFn = (context: ExecutionContext) => unknown;

/**
 * Which errors `storeErrors` stores: an HTTP status (`402`), a status class (`'4xx'`), an
 * exception class (matched with `instanceof`), or a predicate.
 */
export type IdempotencyErrorMatcher =
  | number
  | `${1 | 2 | 3 | 4 | 5}xx`
  | (abstract new (...args: never[]) => Error)
  | ((error: unknown, context: ExecutionContext) => boolean);

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
  /**
   * PostgreSQL to use instead of Redis (needs the `pg` package): a `postgres://` connection
   * string, a `pg.Pool` of yours (never ended by the module), or an
   * {@link IdempotencyPostgresConfig} (`connectionString` or `pool`, `table`, `ensureSchema`, the
   * sweeper's interval and batch size). A pool created from a connection string is ended on
   * application shutdown. Not together with `redis`. See docs/postgres.md.
   */
  postgres?: string | Pool | IdempotencyPostgresConfig;
  /**
   * Encrypts what is stored of each outcome (body, headers, stored errors) with AES-256-GCM, on
   * every store. See {@link IdempotencyEncryptionOptions} and docs/security.md.
   */
  encryption?: IdempotencyEncryptionOptions;
  /**
   * MySQL 5.7.7+ or MariaDB 10.2+ to use instead of Redis (needs the `mysql2` package): a
   * `mysql://` connection string, a mysql2 pool of yours (never ended by the module), or an
   * {@link IdempotencyMysqlConfig} (`connectionString` or `pool`, `table`, `ensureSchema`, the
   * sweeper's interval and batch size). A pool created from a connection string is ended on
   * application shutdown. Not together with `redis` or `postgres`. See docs/mysql.md.
   */
  mysql?: string | MysqlPool | MysqlPromisePool | IdempotencyMysqlConfig;
  /** Any store implementation; takes precedence over `redis`. Never closed by the module. */
  store?: IdempotencyStore;
  /**
   * Lets the in-memory store run with `NODE_ENV=production`. Without `redis`, `postgres` or
   * `store` the module uses the in-memory store, whose records live in one process: a retry that
   * reaches another instance runs the handler again. In production that refuses to boot unless
   * this is `true` (a single instance, a preview environment). Default: false.
   */
  allowInMemoryStorage?: boolean;
  /** Receives every outcome (claimed, replayed, conflict, ...); keys are hashed, never raw. */
  onEvent?: (event: IdempotencyEvent) => void;
  /**
   * Record OpenTelemetry metrics (a counter per outcome, a histogram of store latency) through
   * `@opentelemetry/api` when that package is installed; without an SDK they cost next to
   * nothing. Default: true.
   */
  metrics?: boolean;
  /**
   * The secret keys from `derivedIdempotencyKey()` and `propagateKeys` are derived with
   * (HMAC-SHA-256): a string or Buffer of at least 32 bytes, e.g. 32 random bytes in base64,
   * kept with your other secrets. Set the same value in every replica and keep it across
   * deploys: a re-run after a crash must derive the same key as the first run, wherever it runs,
   * and changing it changes every derived key. Give each app its own. No default: without it,
   * `propagateKeys` fails at boot and `derivedIdempotencyKey()` throws.
   */
  keyDerivationSecret?: string | Buffer;
}

/**
 * Encryption at rest (option `encryption`). Stored bodies, headers and errors are sealed with
 * AES-256-GCM under the first key and opened with whichever key sealed them; the fingerprint and
 * record keys are hashes already. A record no key opens is answered with 500
 * `IDEMPOTENCY_RECORD_UNREADABLE` (the handler does not run).
 */
export interface IdempotencyEncryptionOptions {
  /**
   * The keys, current first: it seals every new record; all of them open records. To rotate,
   * prepend a new key and drop the old one once records sealed with it have expired (`ttl`).
   * Each is a 32-byte Buffer (used as it is) or a secret string of at least 32 characters
   * (expanded to a key with HKDF-SHA-256). Generate one with
   * `openssl rand -base64 32` or `crypto.randomBytes(32)`.
   */
  keys: (Buffer | string)[];
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

type OptionalHooks = 'key' | 'scope' | 'onReplay' | 'onReject' | 'keySpace';

/** Route options with every default filled in. */
export type ResolvedIdempotencyOptions = Required<
  Omit<IdempotencyOptions, OptionalHooks | IdempotencyDurationOption>
> &
  Record<IdempotencyDurationOption, number> &
  Pick<IdempotencyOptions, OptionalHooks> &
  Pick<IdempotencyModuleOptions, 'onEvent' | 'keyDerivationSecret'>;
