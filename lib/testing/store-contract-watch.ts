import { strict as assert } from 'node:assert';
import { type ContractContext, response, signal } from './store-contract-support';

/**
 * watch(): a waited-on record's completion and release notify the key's watchers (deletion: see
 * the operator tests). A store that cannot notify resolves undefined, and these pass.
 */
export function watchContract(c: ContractContext): void {
  const { it, timeout, lease, key, claim } = c;

  it(
    'notifies a watcher when a waited-on record completes (or says it cannot notify)',
    async () => {
      const k = key();
      // A lease that outlasts the watcher's set-up (a Cluster opens a subscriber connection).
      await claim(k, 'a', 'fp', 60_000);
      const seen = signal();
      const unwatch = await c.store.watch(k, seen.fire);
      if (unwatch === undefined) return; // This store cannot notify: waiters get 409.
      try {
        const waiting = await c.store.claim(k, {
          token: 'b',
          fingerprint: 'fp',
          leaseMs: lease,
          waiting: true,
        });
        assert.equal(waiting.status, 'in_progress');
        // Newline and high bytes in the body: a store that hands it over must keep it intact.
        const stored = response('done', [10, 0, 255]);
        assert.equal(await c.store.complete(k, 'a', stored, 60_000), true);
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
      const unwatchGone = await c.store.watch(k, gone.fire);
      const unwatch = await c.store.watch(k, stays.fire);
      if (unwatch === undefined) return;
      unwatchGone!();
      try {
        await c.store.claim(k, { token: 'b', fingerprint: 'fp', leaseMs: lease, waiting: true });
        assert.equal(await c.store.release(k, 'a'), true);
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
}
