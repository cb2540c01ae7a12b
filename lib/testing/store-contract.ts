import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import type {
  CompletedOutcome,
  IdempotencyStore,
  StoredResponse,
} from '../stores/idempotency.store';

type Body = () => void | Promise<void>;

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

const response = (text: string, extra: number[] = []): StoredResponse => ({
  meta: JSON.stringify({ s: 201, k: 'text', note: text }),
  body: Buffer.concat([Buffer.from(text), Buffer.from(extra)]),
});

/**
 * A listener that counts its calls and keeps the last outcome it was handed, and a way to wait
 * (at most 5 s) for the first call.
 */
function signal() {
  let count = 0;
  let last: CompletedOutcome | undefined;
  let resolve!: () => void;
  const fired = new Promise<void>((r) => (resolve = r));
  return {
    fire: (completed?: CompletedOutcome) => {
      count++;
      last = completed;
      resolve();
    },
    get count() {
      return count;
    },
    get last() {
      return last;
    },
    async wait(): Promise<void> {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error('the watcher was not notified within 5 s')),
          5_000,
        );
      });
      try {
        await Promise.race([fired, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
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

  /** inspect() and delete(): operator calls, with the same fencing as the rest. */
  const operatorTests = () => {
    it(
      'inspects a key never claimed as absent',
      async () => {
        assert.deepEqual(await store.inspect(key()), { state: 'absent' });
      },
      timeout,
    );

    it(
      'inspects a claimed key as pending with the lease left, without changing it',
      async () => {
        const k = key();
        await claim(k, 'a', 'fp', 60_000);
        const seen = await store.inspect(k);
        assert.equal(seen.state, 'pending');
        assert.ok(seen.state === 'pending' && seen.leaseMsLeft > 50_000, JSON.stringify(seen));
        assert.ok(seen.state === 'pending' && seen.leaseMsLeft <= 60_000, JSON.stringify(seen));
        assert.equal((await claim(k, 'b', 'fp', 60_000)).status, 'in_progress');
        assert.equal(await store.complete(k, 'a', response('ok'), 60_000), true);
      },
      timeout,
    );

    it(
      'inspects a completed record: its meta, body size, age and time left, never the body',
      async () => {
        const k = key();
        await claim(k, 'a');
        // Multi-byte characters and high bytes: the size is in bytes, not characters.
        const stored = response('héllo wörld', [0, 255, 10, 13]);
        assert.equal(await store.complete(k, 'a', stored, 60_000), true);
        const first = await store.inspect(k);
        assert.equal(first.state, 'completed');
        if (first.state !== 'completed') return;
        assert.deepEqual(Object.keys(first).sort(), [
          'ageMs',
          'bytes',
          'meta',
          'state',
          'ttlMsLeft',
        ]);
        assert.equal(first.meta, stored.meta);
        assert.equal(first.bytes, stored.body.length);
        assert.ok(first.ageMs >= 0 && first.ageMs <= 10_000, `ageMs ${first.ageMs}`);
        assert.ok(first.ttlMsLeft > 50_000 && first.ttlMsLeft <= 60_000, `ttl ${first.ttlMsLeft}`);
        // Time passes for the record: it ages and its time left shrinks.
        await options.advanceTime(lease);
        const later = await store.inspect(k);
        assert.ok(later.state === 'completed', JSON.stringify(later));
        assert.ok(later.ageMs >= first.ageMs + lease / 2, `ageMs ${later.ageMs}`);
        assert.ok(later.ttlMsLeft <= first.ttlMsLeft - lease / 2, `ttl ${later.ttlMsLeft}`);
        const again = await claim(k, 'b');
        assert.ok(
          again.status === 'completed' && Buffer.from(again.response.body).equals(stored.body),
        );
      },
      timeout,
    );

    it(
      'inspects a released key as absent',
      async () => {
        const k = key();
        await claim(k, 'a');
        assert.equal(await store.release(k, 'a'), true);
        assert.deepEqual(await store.inspect(k), { state: 'absent' });
      },
      timeout,
    );

    it(
      'inspects a key whose lease or ttl ran out as absent',
      async () => {
        const [held, done] = [key(), key()];
        await claim(held, 'a');
        await claim(done, 'a');
        assert.equal(await store.complete(done, 'a', response('short'), lease), true);
        await options.advanceTime(lease + 100);
        assert.deepEqual(await store.inspect(held), { state: 'absent' });
        assert.deepEqual(await store.inspect(done), { state: 'absent' });
      },
      timeout,
    );

    it(
      'deletes a completed record: the key is free again, for any fingerprint',
      async () => {
        const k = key();
        await claim(k, 'a', 'one');
        assert.equal(await store.complete(k, 'a', response('done'), 60_000), true);
        assert.equal(await store.delete(k), true);
        assert.deepEqual(await store.inspect(k), { state: 'absent' });
        assert.equal(await store.delete(k), false);
        assert.deepEqual(await claim(k, 'b', 'two'), { status: 'claimed' });
      },
      timeout,
    );

    it(
      'deletes a pending record and fences its owner out, before and after a new claim',
      async () => {
        const k = key();
        await claim(k, 'zombie', 'fp', 60_000);
        assert.equal(await store.delete(k), true);
        assert.equal(await store.complete(k, 'zombie', response('late'), 60_000), false);
        assert.equal(await store.extend(k, 'zombie', 60_000), false);
        assert.equal(await store.release(k, 'zombie'), false);
        assert.deepEqual(await store.inspect(k), { state: 'absent' });
        assert.deepEqual(await claim(k, 'heir', 'fp', 60_000), { status: 'claimed' });
        assert.equal(await store.complete(k, 'zombie', response('late'), 60_000), false);
        assert.equal(await store.complete(k, 'heir', response('heir'), 60_000), true);
        const again = await claim(k, 'c');
        assert.ok(again.status === 'completed' && again.response.body.toString() === 'heir');
      },
      timeout,
    );

    it(
      'deletes nothing at a key never claimed, and says so',
      async () => {
        const k = key();
        assert.equal(await store.delete(k), false);
        assert.deepEqual(await claim(k, 'a'), { status: 'claimed' });
      },
      timeout,
    );

    it(
      'notifies a watcher when a waited-on record is deleted, so that it claims again',
      async () => {
        const k = key();
        await claim(k, 'a', 'fp', 60_000);
        const seen = signal();
        const unwatch = await store.watch(k, seen.fire);
        if (unwatch === undefined) return; // This store cannot notify: waiters get 409.
        try {
          const waiting = await store.claim(k, {
            token: 'b',
            fingerprint: 'fp',
            leaseMs: lease,
            waiting: true,
          });
          assert.equal(waiting.status, 'in_progress');
          assert.equal(await store.delete(k), true);
          await seen.wait();
          assert.equal(seen.last, undefined, 'a delete hands over no response');
          assert.deepEqual(await claim(k, 'b'), { status: 'claimed' });
          assert.equal(await store.complete(k, 'a', response('late'), 60_000), false);
        } finally {
          unwatch();
        }
      },
      timeout,
    );
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

    it(
      'notifies a watcher when a waited-on record completes (or says it cannot notify)',
      async () => {
        const k = key();
        // A lease that outlasts the watcher's set-up (a Cluster opens a subscriber connection).
        await claim(k, 'a', 'fp', 60_000);
        const seen = signal();
        const unwatch = await store.watch(k, seen.fire);
        if (unwatch === undefined) return; // This store cannot notify: waiters get 409.
        try {
          const waiting = await store.claim(k, {
            token: 'b',
            fingerprint: 'fp',
            leaseMs: lease,
            waiting: true,
          });
          assert.equal(waiting.status, 'in_progress');
          // Newline and high bytes in the body: a store that hands it over must keep it intact.
          const stored = response('done', [10, 0, 255]);
          assert.equal(await store.complete(k, 'a', stored, 60_000), true);
          await seen.wait();
          const after = await claim(k, 'b');
          assert.ok(after.status === 'completed' && after.response.body.equals(stored.body));
          // Handing over the response is optional; when a store does, it is the stored one.
          if (seen.last !== undefined) {
            assert.equal(seen.last.fingerprint, 'fp');
            assert.equal(seen.last.response.meta, stored.meta);
            assert.ok(seen.last.response.body.equals(stored.body));
          }
        } finally {
          unwatch();
        }
      },
      timeout,
    );

    it(
      'notifies a watcher when a waited-on record is released, and only watchers still watching',
      async () => {
        const k = key();
        // A lease that outlasts the watcher's set-up (a Cluster opens a subscriber connection).
        await claim(k, 'a', 'fp', 60_000);
        const [gone, stays] = [signal(), signal()];
        const unwatchGone = await store.watch(k, gone.fire);
        const unwatch = await store.watch(k, stays.fire);
        if (unwatch === undefined) return;
        unwatchGone!();
        try {
          await store.claim(k, { token: 'b', fingerprint: 'fp', leaseMs: lease, waiting: true });
          assert.equal(await store.release(k, 'a'), true);
          await stays.wait();
          // Listeners of one key are called together: the removed one would have run by now.
          assert.equal(gone.count, 0);
          assert.equal(stays.last, undefined, 'a release hands over no response');
          assert.deepEqual(await claim(k, 'b'), { status: 'claimed' });
        } finally {
          unwatch();
        }
      },
      timeout,
    );

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
      operatorTests();
    }

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
  });
}
