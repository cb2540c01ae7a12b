import type { Pool } from 'pg';
import {
  MemoryIdempotencyStore,
  MysqlIdempotencyStore,
  PostgresIdempotencyStore,
  RedisIdempotencyStore,
  type IdempotencyModuleOptions,
} from '../../lib';
import { DEFAULT_OPTIONS, type ResolvedModuleOptions } from '../../lib/options';
import { checkStoreOptions, createStore } from '../../lib/stores/create-store';

/**
 * The store options are checked where the store is built (createStore, at boot): a misspelt name
 * in `postgres`, `mysql` or `redis` fails with the nearest known name instead of being ignored,
 * as do the store constructors' options. Nothing here connects anywhere: every case fails first.
 */

const fails = (options: IdempotencyModuleOptions) => () => checkStoreOptions(options);
const resolved = (options: IdempotencyModuleOptions) =>
  ({ ...DEFAULT_OPTIONS, ...options }) as ResolvedModuleOptions;

describe('store option names', () => {
  it.each<[string, IdempotencyModuleOptions, string]>([
    [
      'postgres',
      { postgres: { conectionString: 'postgres://x' } as never },
      'postgres: unknown option `conectionString` (did you mean `connectionString`?)',
    ],
    [
      'mysql',
      { mysql: { connectionString: 'mysql://x', tabel: 'records' } as never },
      'mysql: unknown option `tabel` (did you mean `table`?)',
    ],
    [
      'redis (a slip of clusterNodes in what would be ioredis options)',
      { redis: { clusterNodez: [{ host: '127.0.0.1', port: 7000 }] } as never },
      'redis: unknown option `clusterNodez` (did you mean `clusterNodes`?)',
    ],
    [
      'redis (beside clusterNodes)',
      { redis: { clusterNodes: [{ port: 7000 }], clusterOption: {} } as never },
      'redis: unknown option `clusterOption` (did you mean `clusterOptions`?)',
    ],
    [
      'postgres (an option only the store constructor takes)',
      { postgres: { connectionString: 'postgres://x', ownsPool: true } as never },
      'postgres: unknown option `ownsPool`',
    ],
  ])('refuses an unknown name in %s, with the nearest known one', (_, options, message) => {
    expect(fails(options)).toThrow(new TypeError(`IdempotencyModule: ${message}`));
  });

  it('leaves the names of ioredis options to ioredis', () => {
    expect(fails({ redis: { host: '127.0.0.1', port: 6379, lazyConnect: true } })).not.toThrow();
    expect(fails({ redis: { clusterNodes: [{ port: 7000 }], clusterOptions: {} } })).not.toThrow();
  });

  it('runs every check when the store is built, before any client exists', () => {
    expect(() => createStore(resolved({ postgres: { tabel: 'x' } as never }))).toThrow(
      'IdempotencyModule: postgres: unknown option `tabel` (did you mean `table`?)',
    );
    expect(() => createStore(resolved({ redis: '' }))).toThrow(
      'IdempotencyModule: redis must be a Redis URL',
    );
    expect(() => createStore(resolved({ redis: 'redis://x', postgres: 'postgres://x' }))).toThrow(
      'IdempotencyModule: redis and postgres are two stores: set one of them',
    );
    expect(() => createStore(resolved({ postgres: 'postgres://x', mysql: 'mysql://x' }))).toThrow(
      'IdempotencyModule: mysql is a store of its own: set one of redis, postgres and mysql',
    );
    expect(() => createStore(resolved({ store: {} as never }))).toThrow(
      'IdempotencyModule: store must be an IdempotencyStore',
    );
  });

  it.each<[string, () => unknown, string]>([
    [
      'PostgresIdempotencyStore',
      () => new PostgresIdempotencyStore({} as Pool, { tabel: 'x' } as never),
      'PostgresIdempotencyStore: unknown option `tabel` (did you mean `table`?)',
    ],
    [
      'MysqlIdempotencyStore',
      () => new MysqlIdempotencyStore({} as never, { waitPollMaxMS: 100 } as never),
      'MysqlIdempotencyStore: unknown option `waitPollMaxMS` (did you mean `waitPollMaxMs`?)',
    ],
    [
      'RedisIdempotencyStore',
      () => new RedisIdempotencyStore({} as never, { ownClient: true } as never),
      'RedisIdempotencyStore: unknown option `ownClient` (did you mean `ownsClient`?)',
    ],
    [
      'MemoryIdempotencyStore',
      () => new MemoryIdempotencyStore({ maxEntrys: 10 } as never),
      'MemoryIdempotencyStore: unknown option `maxEntrys` (did you mean `maxEntries`?)',
    ],
  ])('%s refuses a misspelt option name', (_, construct, message) => {
    expect(construct).toThrow(new TypeError(message));
  });
});

describe('mysql: connectionString, as postgres takes it', () => {
  it('takes connectionString, and uri (its old name), but not both', () => {
    expect(fails({ mysql: { connectionString: 'mysql://x' } })).not.toThrow();
    expect(fails({ mysql: { uri: 'mysql://x' } })).not.toThrow();
    expect(fails({ mysql: { connectionString: 'mysql://x', uri: 'mysql://x' } })).toThrow(
      'IdempotencyModule: mysql takes connectionString or uri (its old name), not both',
    );
    expect(fails({ mysql: { connectionString: ' ' } })).toThrow(
      'IdempotencyModule: mysql.connectionString must be a non-empty string',
    );
    expect(fails({ mysql: { connectionString: 'mysql://x', pool: {} as never } })).toThrow(
      'IdempotencyModule: mysql takes connectionString or pool, not both',
    );
    expect(fails({ mysql: { table: 'records' } })).toThrow(
      'IdempotencyModule: mysql needs connectionString, pool or poolConfig',
    );
  });
});
