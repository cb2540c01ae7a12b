import { Logger } from '@nestjs/common';
import { loadPeer } from '../../utils/load-optional';
import { MysqlIdempotencyStore } from './mysql-idempotency.store';
import { ownSqlOptions } from '../sql/options';
import { CONFIG, type IdempotencyMysqlConfig, isMysqlPool } from './mysql-options';

const logger = new Logger('Idempotency');
let warnedUri = false;

/**
 * The MySQL store for the module option `mysql` (checked already, see `checkMysqlOption`): on
 * your pool as it is, or on a pool built from `connectionString` (or its old name `uri`, with a
 * deprecation warning once per process) and `poolConfig`, which the store then owns and ends on
 * close.
 * @param storeTimeout the module's `storeTimeout` in ms: how long a new connection may take
 */
export function createMysqlStore(
  config: string | IdempotencyMysqlConfig | NonNullable<IdempotencyMysqlConfig['pool']>,
  storeTimeout: number,
): MysqlIdempotencyStore {
  if (isMysqlPool(config)) return new MysqlIdempotencyStore(config);
  const { connectionString, uri, pool, poolConfig, ...storeOptions }: IdempotencyMysqlConfig =
    typeof config === 'string' ? { connectionString: config } : ownSqlOptions(config, CONFIG);
  if (uri !== undefined && !warnedUri) {
    warnedUri = true;
    logger.warn(
      'mysql.uri is deprecated: name it connectionString, as the postgres option does. uri ' +
        'still works, and will be removed in a future major release.',
    );
  }
  if (pool) return new MysqlIdempotencyStore(pool, storeOptions);
  const url = connectionString ?? uri;
  const mysql = loadPeer<typeof import('mysql2')>('mysql2', 'the `mysql` option');
  const created = mysql.createPool({
    connectTimeout: storeTimeout,
    enableKeepAlive: true,
    ...poolConfig,
    ...(url !== undefined && { uri: url }),
  });
  return new MysqlIdempotencyStore(created, { ...storeOptions, ownsPool: true });
}
