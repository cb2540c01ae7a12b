import Redis from 'ioredis';
import type { Pool } from 'pg';
import {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  MemoryIdempotencyStore,
  PostgresIdempotencyStore,
  RecordInspection,
  RedisIdempotencyStore,
  StoredResponse,
  WatchListener,
} from '../../lib';
import { dropTable, testPool, uniqueTable } from './postgres';
import { bytesUnder, deleteKeysUnder, testRedisUrl, uniquePrefix } from './redis';

export type StoreName = 'memory' | 'redis' | 'postgres';
export const STORE_NAMES: StoreName[] = ['memory', 'redis', 'postgres'];

/** A real store of each kind, owned by the test (passed as `store`, so never closed by the app). */
export interface RealStore {
  store: IdempotencyStore;
  /** The Redis key prefix the store writes under (module option `keyPrefix`). */
  keyPrefix: string;
  /** Every stored byte (Redis values, PostgreSQL rows), for looking for plaintext in them. */
  rawBytes(): Promise<Buffer>;
  close(): Promise<void>;
}

/** A real store on the shared services: a fresh key prefix or table, removed by close(). */
export async function realStore(name: StoreName): Promise<RealStore> {
  const keyPrefix = uniquePrefix(name);
  if (name === 'memory') {
    const store = new MemoryIdempotencyStore();
    return { store, keyPrefix, rawBytes: async () => Buffer.alloc(0), close: () => store.close() };
  }
  if (name === 'redis') {
    const client = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
    const store = new RedisIdempotencyStore(client);
    return {
      store,
      keyPrefix,
      rawBytes: () => bytesUnder(client, keyPrefix),
      close: async () => {
        await deleteKeysUnder(client, keyPrefix);
        await client.quit();
      },
    };
  }
  const pool: Pool = await testPool(); // fails naming PostgreSQL when it is not there
  const table = uniqueTable('lease');
  const store = new PostgresIdempotencyStore(pool, { table, ensureSchema: true });
  return {
    store,
    keyPrefix,
    rawBytes: async () => {
      const { rows } = await pool.query<{ meta: string | null; body: Buffer | null }>(
        `SELECT meta, body FROM "${table}"`,
      );
      return Buffer.concat(
        rows.flatMap((row) => [Buffer.from(row.meta ?? ''), row.body ?? Buffer.alloc(0)]),
      );
    },
    close: async () => {
      await store.close();
      await dropTable(pool, table);
      await pool.end();
    },
  };
}

/**
 * A real store whose calls a test can slow down or break, to reproduce what a network does
 * (a slow write, a reply lost after the command ran). Every call reaches the real store.
 */
export class WrappedStore extends IdempotencyStore {
  /** Runs before each complete() reaches the store (a slow write). */
  beforeComplete?: () => Promise<void>;
  /** Runs before each extend() reaches the store (a slow renewal). */
  beforeExtend?: () => Promise<void>;
  /** When set, claim() reaches the store, then rejects with this (the reply was lost). */
  failClaimAfter?: Error;
  /** extend() calls made, and how many were in flight at once at most. */
  extends = 0;
  maxConcurrentExtends = 0;
  private extending = 0;
  private listeners: (() => void)[] = [];

  constructor(readonly inner: IdempotencyStore) {
    super();
  }

  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const result = await this.inner.claim(key, request);
    if (this.failClaimAfter) throw this.failClaimAfter;
    return result;
  }

  async complete(key: string, token: string, response: StoredResponse, ttlMs: number) {
    await this.beforeComplete?.();
    return this.inner.complete(key, token, response, ttlMs);
  }

  release(key: string, token: string): Promise<boolean> {
    return this.inner.release(key, token);
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.extending++;
    this.maxConcurrentExtends = Math.max(this.maxConcurrentExtends, this.extending);
    try {
      await this.beforeExtend?.();
      return await this.inner.extend(key, token, leaseMs);
    } finally {
      this.extending--;
      this.extends++;
      for (const listener of [...this.listeners]) listener();
    }
  }

  /**
   * Resolves once `count` more renewals were made, or after `fallbackMs` (so that a test of
   * code that does not renew goes on, and fails on what follows, rather than hanging).
   */
  renewals(count: number, fallbackMs: number): Promise<void> {
    const target = this.extends + count;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.listeners = this.listeners.filter((l) => l !== listener);
        resolve();
      };
      const timer = setTimeout(done, fallbackMs);
      const listener = () => this.extends >= target && done();
      this.listeners.push(listener);
    });
  }

  override watch(key: string, listener: WatchListener) {
    return this.inner.watch(key, listener);
  }

  override inspect(key: string): Promise<RecordInspection> {
    return this.inner.inspect(key);
  }

  override delete(key: string): Promise<boolean> {
    return this.inner.delete(key);
  }
}

/** The real store of a `describe` block, and the apps its tests started. */
export interface StoreSuite {
  /** Opened by the block's `beforeAll` (a test may swap in another; the last is closed). */
  real: RealStore;
  /** Closes `app` after the test that started it. */
  track<T extends { close(): Promise<unknown> }>(app: T): T;
  /** The apps the running test started, oldest first (a test may close one itself). */
  readonly apps: { close(): Promise<unknown> }[];
}

/**
 * Registers the enclosing `describe`'s hooks for a real `name` store: opened before its tests,
 * closed after them; the apps a test {@link StoreSuite.track}s are closed after that test.
 */
export function storeSuite(name: StoreName): StoreSuite {
  const apps: { close(): Promise<unknown> }[] = [];
  const suite = {
    apps,
    track<T extends { close(): Promise<unknown> }>(app: T): T {
      apps.push(app);
      return app;
    },
  } as StoreSuite;
  beforeAll(async () => {
    suite.real = await realStore(name);
  }, 30_000);
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => suite.real?.close());
  return suite;
}
