import { Logger } from '@nestjs/common';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-module-options.interface';
import type { ResolvedModuleOptions } from '../options';
import type { IdempotencyStore } from './idempotency.store';
import { MemoryIdempotencyStore } from './memory/memory-idempotency.store';
import { checkMysqlOption } from './mysql/mysql-options';
import { createMysqlStore } from './mysql/mysql-pool';
import { checkPostgresOption } from './postgres/postgres-options';
import { createPostgresStore } from './postgres/postgres-pool';
import { createRedisStore } from './redis/redis-client';
import { checkRedisOption } from './redis/redis-options';

const logger = new Logger('Idempotency');
let warnedMemory = false;

/**
 * Builds the store the module options ask for: `store`, else `redis`, `postgres` or `mysql`
 * (each backend builds its own client), else the memory store, which it refuses with
 * `NODE_ENV=production` unless `allowInMemoryStorage` is set. Runs at boot, in the provider of
 * `IdempotencyStore`, after checking every store option (see {@link checkStoreOptions}).
 */
export function createStore(options: ResolvedModuleOptions): IdempotencyStore {
  checkStoreOptions(options);
  if (options.store) return options.store;
  if (options.redis !== undefined) return createRedisStore(options.redis);
  if (options.postgres !== undefined) {
    return createPostgresStore(options.postgres, options.storeTimeout);
  }
  if (options.mysql !== undefined) return createMysqlStore(options.mysql, options.storeTimeout);
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

const STORE_METHODS = ['claim', 'complete', 'release', 'extend'] as const;

/**
 * Checks the options that choose and configure the store (`store`, `redis`, `postgres`, `mysql`:
 * their shapes, names and values, and that only one backend is set).
 * @throws TypeError `IdempotencyModule: <problem>`, naming the option
 */
export function checkStoreOptions(options: IdempotencyModuleOptions): void {
  const problem = storeOptionsProblem(options);
  if (problem) throw new TypeError(`IdempotencyModule: ${problem}`);
}

function storeOptionsProblem(options: IdempotencyModuleOptions): string | undefined {
  const { store, redis, postgres, mysql } = options;
  if (store !== undefined) {
    const methods = store as unknown as Record<string, unknown> | null;
    if (!STORE_METHODS.every((method) => typeof methods?.[method] === 'function')) {
      return 'store must be an IdempotencyStore (claim, complete, release, extend); pass an ioredis client as `redis`';
    }
  }
  if (redis !== undefined) {
    const problem = checkRedisOption(redis);
    if (problem) return problem;
  }
  if (postgres !== undefined) {
    if (redis !== undefined) return 'redis and postgres are two stores: set one of them';
    const problem = checkPostgresOption(postgres);
    if (problem) return problem;
  }
  if (mysql !== undefined) {
    if (redis !== undefined || postgres !== undefined) {
      return 'mysql is a store of its own: set one of redis, postgres and mysql';
    }
    return checkMysqlOption(mysql);
  }
  return undefined;
}
