import { Logger } from '@nestjs/common';
import type { PoolConfig } from 'pg';
import { loadPeer } from '../../utils/load-optional';
import { PostgresIdempotencyStore } from './postgres-idempotency.store';
import { ownSqlOptions } from '../sql/options';
import { CONFIG, type IdempotencyPostgresConfig, isPgPool } from './postgres-options';

const logger = new Logger('Idempotency');

/**
 * Settings of pools the module creates, under the caller's `poolConfig`: a connection attempt
 * gives up after `storeTimeout` (a claim waiting longer has been answered 503 anyway), and TCP
 * keepalive finds a peer that vanished without closing the connection.
 */
const POOL_DEFAULTS: PoolConfig = { keepAlive: true, application_name: 'nestjs-idempotency' };

/**
 * The PostgreSQL store for the module option `postgres` (checked already, see
 * `checkPostgresOption`): on your pool as it is, or on a pool built from `connectionString` and
 * `poolConfig`, which the store then owns and ends on close.
 * @param storeTimeout the module's `storeTimeout` in ms: how long a new connection may take
 */
export function createPostgresStore(
  config: string | IdempotencyPostgresConfig | NonNullable<IdempotencyPostgresConfig['pool']>,
  storeTimeout: number,
): PostgresIdempotencyStore {
  if (isPgPool(config)) return new PostgresIdempotencyStore(config);
  const { connectionString, pool, poolConfig, ...storeOptions }: IdempotencyPostgresConfig =
    typeof config === 'string' ? { connectionString: config } : ownSqlOptions(config, CONFIG);
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
