import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../stores/idempotency.store';
import { listingContract } from './store-contract-listing';
import { operatorContract } from './store-contract-operators';
import { stepContract } from './store-contract-steps';
import { type Body, type ContractContext, response } from './store-contract-support';
import { watchContract } from './store-contract-watch';

/** Options of {@link runIdempotencyStoreContract}. */
export interface StoreContractOptions {
  /** Name shown in the test titles. */
  name: string;
  /** Returns the store under test (called once, before the tests). */
  createStore: () => IdempotencyStore | Promise<IdempotencyStore>;
  /** Called once after the tests; default `store.close()`. */
  closeStore?: (store: IdempotencyStore) => Promise<void>;
  /** Lets `ms` milliseconds pass for the store: advance a fake clock, or wait on a real one. */
  advanceTime: (ms: number) => Promise<void>;
  /** Lease used by the time-based tests, in ms; keep it short on a real clock. Default: 300. */
  leaseMs?: number;
  /**
   * Whether the store implements the operator methods `inspect()` and `delete()`. Default true.
   * The contract lets a store that cannot throw from them instead: set false, and the suite checks
   * that they reject rather than their semantics.
   */
  operatorMethods?: boolean;
  /** Prefix of the keys the tests create. Default: `'contract:'`. */
  keyPrefix?: string;
  /** The test runner's functions; default: the globals (Jest, Vitest with globals, Mocha). */
  runner?: {
    describe: (name: string, fn: () => void) => void;
    it: (name: string, fn: Body, timeout?: number) => void;
    beforeAll: (fn: Body, timeout?: number) => void;
    afterAll: (fn: Body, timeout?: number) => void;
  };
}

/**
 * The contract every {@link IdempotencyStore} must meet, as a test suite. Run it against your own
 * store to check it behaves like the built-in ones:
 *
 * ```ts
 * import { runIdempotencyStoreContract } from 'nestjs-idempotency/testing';
 * runIdempotencyStoreContract({
 *   name: 'MyStore',
 *   createStore: () => new MyStore(),
 *   advanceTime: (ms) => new Promise((r) => setTimeout(r, ms)),
 * });
 * ```
 */
export function runIdempotencyStoreContract(options: StoreContractOptions): void {
  const g = globalThis as unknown as Required<StoreContractOptions>['runner'];
  const { describe, it, beforeAll, afterAll } = options.runner ?? g;
  const lease = options.leaseMs ?? 300;
  const timeout = 20_000 + lease * 10;
  const key = () => `${options.keyPrefix ?? 'contract:'}{${randomUUID()}}`;
  const claim = (k: string, token: string, fingerprint = 'fp', leaseMs = lease) =>
    store.claim(k, { token, fingerprint, leaseMs });
  let store: IdempotencyStore;
  const context: ContractContext = {
    get store() {
      return store;
    },
    it,
    timeout,
    lease,
    key,
    claim,
    advanceTime: (ms) => options.advanceTime(ms),
  };

  describe(`IdempotencyStore contract: ${options.name}`, () => {
    beforeAll(async () => {
      store = await options.createStore();
    }, timeout);
    afterAll(async () => {
      await (options.closeStore ? options.closeStore(store) : store.close());
    }, timeout);

    it(
      'claims a free key once; a second claim sees it in progress with the lease left',
      async () => {
        const k = key();
        assert.deepEqual(await claim(k, 'a', 'fp', 60_000), { status: 'claimed' });
        const second = await claim(k, 'b', 'fp', 60_000);
        assert.equal(second.status, 'in_progress');
        assert.ok(second.status === 'in_progress' && second.retryAfterMs > 50_000);
        assert.ok(second.status === 'in_progress' && second.retryAfterMs <= 60_000);
      },
      timeout,
    );

    it(
      'lets exactly one of many concurrent claims win',
      async () => {
        const k = key();
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => claim(k, `t${i}`, 'fp', 60_000)),
        );
        assert.equal(results.filter((r) => r.status === 'claimed').length, 1);
        assert.equal(results.filter((r) => r.status === 'in_progress').length, 49);
      },
      timeout,
    );

    it(
      'stores the owner’s response byte for byte and returns it to later claims',
      async () => {
        const k = key();
        await claim(k, 'a');
        const stored = response('hello', [0, 255, 10, 13]);
        assert.equal(await store.complete(k, 'a', stored, 60_000), true);
        const again = await claim(k, 'b');
        assert.equal(again.status, 'completed');
        if (again.status !== 'completed') return;
        assert.equal(again.response.meta, stored.meta);
        assert.ok(Buffer.from(again.response.body).equals(stored.body));
      },
      timeout,
    );

    it(
      'keeps empty and 1 MiB bodies intact',
      async () => {
        for (const body of [Buffer.alloc(0), Buffer.alloc(1024 * 1024, 7)]) {
          const k = key();
          await claim(k, 'a');
          assert.equal(await store.complete(k, 'a', { meta: 'm', body }, 60_000), true);
          const again = await claim(k, 'b');
          assert.ok(again.status === 'completed' && Buffer.from(again.response.body).equals(body));
        }
      },
      timeout,
    );

    it(
      'refuses completion, release and extension by a token that does not own the key',
      async () => {
        const k = key();
        await claim(k, 'owner', 'fp', 60_000);
        assert.equal(await store.complete(k, 'intruder', response('x'), 60_000), false);
        assert.equal(await store.release(k, 'intruder'), false);
        assert.equal(await store.extend(k, 'intruder', 60_000), false);
        assert.equal((await claim(k, 'other', 'fp', 60_000)).status, 'in_progress');
        assert.equal(await store.complete(k, 'owner', response('mine'), 60_000), true);
      },
      timeout,
    );

    it(
      'frees a released key for the next claim, and only the owner can release',
      async () => {
        const k = key();
        await claim(k, 'a');
        assert.equal(await store.release(k, 'a'), true);
        assert.equal(await store.release(k, 'a'), false);
        assert.deepEqual(await claim(k, 'b'), { status: 'claimed' });
      },
      timeout,
    );

    it(
      'never releases, extends or overwrites a completed record',
      async () => {
        const k = key();
        await claim(k, 'a');
        await store.complete(k, 'a', response('first'), 60_000);
        assert.equal(await store.release(k, 'a'), false);
        assert.equal(await store.extend(k, 'a', 60_000), false);
        assert.equal(await store.complete(k, 'a', response('second'), 60_000), false);
        const again = await claim(k, 'b');
        assert.ok(again.status === 'completed' && again.response.body.toString() === 'first');
      },
      timeout,
    );

    it(
      'reports a fingerprint mismatch before in-progress and completed states',
      async () => {
        const k = key();
        await claim(k, 'a', 'one', 60_000);
        assert.deepEqual(await claim(k, 'b', 'two'), { status: 'key_reused' });
        assert.equal((await claim(k, 'b', '')).status, 'in_progress');
        await store.complete(k, 'a', response('done'), 60_000);
        assert.deepEqual(await claim(k, 'b', 'two'), { status: 'key_reused' });
        assert.equal((await claim(k, 'b', 'one')).status, 'completed');
        assert.equal((await claim(k, 'b', '')).status, 'completed');
      },
      timeout,
    );

    it(
      'frees a key whose lease expired, and fences the old owner out',
      async () => {
        const k = key();
        await claim(k, 'zombie');
        await options.advanceTime(lease + 100);
        assert.deepEqual(await claim(k, 'heir', 'fp', 60_000), { status: 'claimed' });
        assert.equal(await store.complete(k, 'zombie', response('late'), 60_000), false);
        assert.equal(await store.release(k, 'zombie'), false);
        assert.equal(await store.extend(k, 'zombie', 60_000), false);
        assert.equal(await store.complete(k, 'heir', response('heir'), 60_000), true);
        const again = await claim(k, 'c');
        assert.ok(again.status === 'completed' && again.response.body.toString() === 'heir');
      },
      timeout,
    );

    it(
      'keeps a lease alive while its owner extends it',
      async () => {
        const k = key();
        await claim(k, 'a');
        for (let i = 0; i < 3; i++) {
          await options.advanceTime(Math.floor(lease / 2));
          assert.equal(await store.extend(k, 'a', lease), true);
        }
        assert.equal((await claim(k, 'b')).status, 'in_progress');
        assert.equal(await store.complete(k, 'a', response('ok'), 60_000), true);
      },
      timeout,
    );

    it(
      'forgets a completed record after its ttl',
      async () => {
        const k = key();
        await claim(k, 'a');
        await store.complete(k, 'a', response('short'), lease);
        assert.equal((await claim(k, 'b')).status, 'completed');
        await options.advanceTime(lease + 100);
        assert.deepEqual(await claim(k, 'c'), { status: 'claimed' });
      },
      timeout,
    );

    watchContract(context);

    if (options.operatorMethods === false) {
      it(
        'rejects inspect() and delete(), which it does not support',
        async () => {
          const k = key();
          await assert.rejects(store.inspect(k));
          await assert.rejects(store.delete(k));
        },
        timeout,
      );
    } else {
      operatorContract(context);
    }

    stepContract(context, options.operatorMethods !== false);

    listingContract(context);

    it(
      'keeps keys independent',
      async () => {
        const [k1, k2] = [key(), key()];
        await claim(k1, 'a');
        assert.deepEqual(await claim(k2, 'b'), { status: 'claimed' });
        await store.complete(k1, 'a', response('one'), 60_000);
        assert.equal((await claim(k2, 'c')).status, 'in_progress');
      },
      timeout,
    );

    it(
      'answers the optional hooks it has (whenReady, displayName, bootWarnings, healthDetails)',
      async () => {
        const { displayName } = store;
        assert.ok(displayName === undefined || typeof displayName === 'string', 'displayName');
        if (store.whenReady) assert.equal(await store.whenReady(timeout / 2), true, 'whenReady');
        if (store.bootWarnings) {
          const warnings: unknown = await store.bootWarnings();
          assert.ok(
            Array.isArray(warnings) && warnings.every((line) => typeof line === 'string'),
            `bootWarnings resolves strings, got ${JSON.stringify(warnings)}`,
          );
        }
        if (store.healthDetails) {
          const details: unknown = await store.healthDetails();
          assert.ok(
            details === undefined ||
              (typeof details === 'object' && details !== null && !('status' in details)),
            `healthDetails resolves undefined or an object without status, got ${JSON.stringify(details)}`,
          );
        }
      },
      timeout,
    );
  });
}
