import { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import type { PoolConfig } from 'pg';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-options.interface';
import type { ResolvedModuleOptions } from '../options';
import type { IdempotencyStore } from './idempotency.store';
import { MemoryIdempotencyStore } from './memory/memory-idempotency.store';
import {
  IdempotencyPostgresConfig,
  PostgresIdempotencyStore,
} from './postgres/postgres-idempotency.store';
import { isPgPool } from './postgres/postgres-options';
import type { IdempotencyMysqlConfig } from './mysql/mysql-options';
import { isMysqlPool } from './mysql/mysql-options';
import { MysqlIdempotencyStore } from './mysql/mysql-idempotency.store';
import { RedisIdempotencyStore } from './redis/redis-idempotency.store';
import { loadPeer } from '../utils/load-optional';

const logger = new Logger('Idempotency');
let warnedMemory = false;

/**
 * Settings for clients the module creates: fail fast instead of retrying while Redis is down, and
 * auto-pipelining: the commands of every request handled in one event-loop turn leave in one
 * write. Socket writes to Redis were the largest item of a first execution's CPU profile (about
 * 38 µs a request without it); in paired bench rounds it raised first executions from 0.52x to
 * 0.59x of the baseline and replays from 0.77x to 0.88x. On one node the store's own scripts go
 * around it, corking the socket for the turn instead (see `defineIdempotencyCommands`); a Cluster's
 * go through it. The offline queue is on only until the first connection is ready (see
 * {@link queueUntilFirstReady}).
 */
const CLIENT_DEFAULTS = { maxRetriesPerRequest: 1, enableAutoPipelining: true };

/**
 * Settings of pools the module creates, under the caller's `poolConfig`: a connection attempt
 * gives up after `storeTimeout` (a claim waiting longer has been answered 503 anyway), and TCP
 * keepalive finds a peer that vanished without closing the connection.
 */
const POOL_DEFAULTS: PoolConfig = { keepAlive: true, application_name: 'nestjs-idempotency' };

/**
 * Builds the store the module options ask for: `store`, else `redis` or `postgres`, else the
 * memory store, which it refuses with `NODE_ENV=production` unless `allowInMemoryStorage` is set.
 */
export function createStore(options: ResolvedModuleOptions): IdempotencyStore {
  if (options.store) return options.store;
  if (options.redis !== undefined) {
    const { client, owned } = createRedisClient(options.redis);
    return new RedisIdempotencyStore(client, { ownsClient: owned });
  }
  if (options.postgres !== undefined) {
    return createPostgresStore(options.postgres, options.storeTimeout);
  }
  if (options.mysql !== undefined) {
    return createMysqlStore(options.mysql, options.storeTimeout);
  }
  if (process.env.NODE_ENV === 'production' && options.allowInMemoryStorage !== true) {
    throw new Error(
      'IdempotencyModule: NODE_ENV is production and no `redis`, `postgres`, `mysql` or `store` is ' +
        'configured. The in-memory store keeps records in this process only, so a retry that ' +
        'reaches another instance (or this one after a restart) runs the handler again. ' +
        'Configure `redis`, `postgres`, `mysql` or `store`, or set `allowInMemoryStorage: true` to run ' +
        'it anyway (a single instance, a preview environment).',
    );
  }
  if (!warnedMemory) {
    warnedMemory = true;
    logger.warn(
      'No redis, postgres, mysql or store configured: using the in-memory store. It is process-local, ' +
        'so several instances of the app do not share keys; configure `redis`, `postgres` or `mysql` for ' +
        'production.',
    );
  }
  return new MemoryIdempotencyStore();
}

function isClient(value: unknown): value is Redis | Cluster {
  return typeof (value as { defineCommand?: unknown })?.defineCommand === 'function';
}

function createRedisClient(config: NonNullable<IdempotencyModuleOptions['redis']>): {
  client: Redis | Cluster;
  owned: boolean;
} {
  if (isClient(config)) return { client: config, owned: false };
  const ioredis = loadPeer<typeof import('ioredis')>('ioredis', 'the `redis` option');
  let client: Redis | Cluster;
  if (typeof config === 'string') {
    const options = { ...CLIENT_DEFAULTS, enableOfflineQueue: true };
    client = queueUntilFirstReady(new ioredis.Redis(config, options), false);
  } else if ('clusterNodes' in config) {
    client = new ioredis.Cluster(config.clusterNodes, {
      enableAutoPipelining: true,
      ...config.clusterOptions,
      redisOptions: { maxRetriesPerRequest: 1, ...config.clusterOptions?.redisOptions },
    });
  } else {
    const options = { ...CLIENT_DEFAULTS, ...config, enableOfflineQueue: true };
    client = queueUntilFirstReady(new ioredis.Redis(options), config.enableOfflineQueue ?? false);
  }
  // Log an outage once, and its end, rather than every reconnection attempt.
  let down = false;
  client.on('error', (error: Error) => {
    if (down) return;
    down = true;
    logger.error(`Redis connection error: ${error.message}; keyed requests fail until it is back`);
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    logger.log('Redis connection is back');
  });
  return { client, owned: true };
}

/**
 * Queues commands while the client makes its first connection, then sets `offlineQueue` (false:
 * fail fast while Redis is down, since a queued claim could run after its request gave up). Nest
 * starts a hybrid app's microservices before it runs the bootstrap hooks, so their first messages
 * can arrive before the module has waited for the connection; those must wait, not fail.
 */
function queueUntilFirstReady(client: Redis, offlineQueue: boolean): Redis {
  client.once('ready', () => (client.options.enableOfflineQueue = offlineQueue));
  return client;
}

function createPostgresStore(
  config: NonNullable<IdempotencyModuleOptions['postgres']>,
  storeTimeout: number,
): PostgresIdempotencyStore {
  if (isPgPool(config)) return new PostgresIdempotencyStore(config);
  const { connectionString, pool, poolConfig, ...storeOptions }: IdempotencyPostgresConfig =
    typeof config === 'string' ? { connectionString: config } : config;
  if (pool) return new PostgresIdempotencyStore(pool, storeOptions);
  const pg = loadPeer<typeof import('pg')>('pg', 'the `postgres` option');
  const created = new pg.Pool({
    ...POOL_DEFAULTS,
    connectionTimeoutMillis: storeTimeout,
    ...poolConfig,
    ...(connectionString !== undefined && { connectionString }),
  });
  // An idle connection that fails emits 'error' on the pool: without a listener the process
  // would crash. Log an outage once, and its end, rather than every failed connection.
  let down = false;
  created.on('error', (error: Error) => {
    if (down) return;
    down = true;
    logger.error(`PostgreSQL connection error: ${error.message}; keyed requests may fail`);
  });
  created.on('connect', () => {
    if (!down) return;
    down = false;
    logger.log('PostgreSQL connection is back');
  });
  return new PostgresIdempotencyStore(created, { ...storeOptions, ownsPool: true });
}

function createMysqlStore(
  config: NonNullable<IdempotencyModuleOptions['mysql']>,
  storeTimeout: number,
): MysqlIdempotencyStore {
  if (isMysqlPool(config)) return new MysqlIdempotencyStore(config);
  const { uri, pool, poolConfig, ...storeOptions }: IdempotencyMysqlConfig =
    typeof config === 'string' ? { uri: config } : config;
  if (pool) return new MysqlIdempotencyStore(pool, storeOptions);
  const mysql = loadPeer<typeof import('mysql2')>('mysql2', 'the `mysql` option');
  const created = mysql.createPool({
    connectTimeout: storeTimeout,
    enableKeepAlive: true,
    ...poolConfig,
    ...(uri !== undefined && { uri }),
  });
  return new MysqlIdempotencyStore(created, { ...storeOptions, ownsPool: true });
}

/**
 * Waits (bounded) until a client the module created is ready, so boot does not race the first
 * request. For PostgreSQL: until a query answers, and with `ensureSchema` until the table exists.
 */
export async function waitUntilReady(store: IdempotencyStore, timeoutMs: number): Promise<boolean> {
  if (store instanceof PostgresIdempotencyStore) return store.whenReady(timeoutMs);
  if (store instanceof MysqlIdempotencyStore) return store.whenReady(timeoutMs);
  if (!(store instanceof RedisIdempotencyStore) || store.client.status === 'ready') return true;
  // A client of yours with lazyConnect stays in 'wait' until its first command: nothing to wait for.
  if (store.client.status === 'wait') return true;
  const client = store.client;
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}
