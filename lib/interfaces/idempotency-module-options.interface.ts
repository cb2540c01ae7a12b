import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { Pool as MysqlPool } from 'mysql2';
import type { Pool as MysqlPromisePool } from 'mysql2/promise';
import type { Pool } from 'pg';
import type { IdempotencyStore } from '../stores/idempotency.store';
import type { IdempotencyMysqlConfig } from '../stores/mysql/mysql-options';
import type { IdempotencyPostgresConfig } from '../stores/postgres/postgres-idempotency.store';
import type { IdempotencyEvent } from './idempotency-event.interface';
import type { IdempotencyDuration, IdempotencyOptions } from './idempotency-options.interface';

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
  /**
   * Keeps the completed outcomes this process replays in its memory, and replays them from there
   * without asking the store: a replay then costs no store round trip. An outcome is kept from
   * the first time this process replays it from the store (never while pending), and for at most
   * `ttl`. The trade-off: for that long, a record deleted from the store (an operator's
   * `IdempotencyRecords.delete()` in another process; one in this process drops it here too) or
   * expired there is still replayed by this process, and the store sees none of those replays.
   * Outcomes stay sealed in memory with `encryption`, and are opened for each replay. `true`
   * takes the defaults of {@link IdempotencyLocalReplayCacheOptions}. Default: false (every
   * replay asks the store). See docs/options.md#localreplaycache.
   */
  localReplayCache?: boolean | IdempotencyLocalReplayCacheOptions;
  /**
   * How long a half-done `resumable` run (steps recorded, never completed, no claim holding its
   * key: it failed or its process died) may wait for the retry that would resume it before it is
   * reported abandoned, counted from the end of its last claim: milliseconds or a duration string
   * (`'15m'`). Each is reported once across every process sharing the store: an `abandoned`
   * event (`onEvent`) and a warning in the log, with its key, route, owner and steps. Needs a
   * store that lists records (memory, Redis, PostgreSQL, MySQL). Keep it below `ttl`, after
   * which the steps are forgotten. `false` turns reporting off. Default: `'15m'` (900 000 ms).
   * See docs/operators.md.
   */
  abandonedAfter?: IdempotencyDuration | false;
}

/** Option `localReplayCache`: how much a process keeps, and for how long. */
export interface IdempotencyLocalReplayCacheOptions {
  /** Most outcomes kept; the least recently replayed goes first. Default: 1 000. */
  maxEntries?: number;
  /**
   * Most bytes of stored bodies kept, in bytes (as stored: compressed, sealed); an outcome over a
   * tenth of it is not kept. Default: 16 777 216 (16 MiB).
   */
  maxBytes?: number;
  /**
   * How long an outcome is replayed from memory once kept: milliseconds or a duration string
   * (`'10s'`). Default: 10 000 (10 s).
   */
  ttl?: IdempotencyDuration;
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
