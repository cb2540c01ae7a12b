import { strict as assert } from 'node:assert';
import { type ContractContext, response, signal } from './store-contract-support';

/** inspect() and delete(): operator calls, with the same fencing as the rest. */
export function operatorContract(c: ContractContext): void {
  const { it, timeout, lease, key, claim } = c;

  it(
    'inspects a key never claimed as absent',
    async () => {
      assert.deepEqual(await c.store.inspect(key()), { state: 'absent' });
    },
    timeout,
  );

  it(
    'inspects a claimed key as pending with the lease left, without changing it',
    async () => {
      const k = key();
      await claim(k, 'a', 'fp', 60_000);
      const seen = await c.store.inspect(k);
      assert.equal(seen.state, 'pending');
      assert.ok(seen.state === 'pending' && seen.leaseMsLeft > 50_000, JSON.stringify(seen));
      assert.ok(seen.state === 'pending' && seen.leaseMsLeft <= 60_000, JSON.stringify(seen));
      assert.equal((await claim(k, 'b', 'fp', 60_000)).status, 'in_progress');
      assert.equal(await c.store.complete(k, 'a', response('ok'), 60_000), true);
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
      assert.equal(await c.store.complete(k, 'a', stored, 60_000), true);
      const first = await c.store.inspect(k);
      assert.equal(first.state, 'completed');
      if (first.state !== 'completed') return;
      assert.deepEqual(Object.keys(first).sort(), ['ageMs', 'bytes', 'meta', 'state', 'ttlMsLeft']);
      assert.equal(first.meta, stored.meta);
      assert.equal(first.bytes, stored.body.length);
      assert.ok(first.ageMs >= 0 && first.ageMs <= 10_000, `ageMs ${first.ageMs}`);
      assert.ok(first.ttlMsLeft > 50_000 && first.ttlMsLeft <= 60_000, `ttl ${first.ttlMsLeft}`);
      // Time passes for the record: it ages and its time left shrinks.
      await c.advanceTime(lease);
      const later = await c.store.inspect(k);
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
      assert.equal(await c.store.release(k, 'a'), true);
      assert.deepEqual(await c.store.inspect(k), { state: 'absent' });
    },
    timeout,
  );

  it(
    'inspects a key whose lease or ttl ran out as absent',
    async () => {
      const [held, done] = [key(), key()];
      await claim(held, 'a');
      await claim(done, 'a');
      assert.equal(await c.store.complete(done, 'a', response('short'), lease), true);
      await c.advanceTime(lease + 100);
      assert.deepEqual(await c.store.inspect(held), { state: 'absent' });
      assert.deepEqual(await c.store.inspect(done), { state: 'absent' });
    },
    timeout,
  );

  it(
    'deletes a completed record: the key is free again, for any fingerprint',
    async () => {
      const k = key();
      await claim(k, 'a', 'one');
      assert.equal(await c.store.complete(k, 'a', response('done'), 60_000), true);
      assert.equal(await c.store.delete(k), true);
      assert.deepEqual(await c.store.inspect(k), { state: 'absent' });
      assert.equal(await c.store.delete(k), false);
      assert.deepEqual(await claim(k, 'b', 'two'), { status: 'claimed' });
    },
    timeout,
  );

  it(
    'deletes a pending record and fences its owner out, before and after a new claim',
    async () => {
      const k = key();
      await claim(k, 'zombie', 'fp', 60_000);
      assert.equal(await c.store.delete(k), true);
      assert.equal(await c.store.complete(k, 'zombie', response('late'), 60_000), false);
      assert.equal(await c.store.extend(k, 'zombie', 60_000), false);
      assert.equal(await c.store.release(k, 'zombie'), false);
      assert.deepEqual(await c.store.inspect(k), { state: 'absent' });
      assert.deepEqual(await claim(k, 'heir', 'fp', 60_000), { status: 'claimed' });
      assert.equal(await c.store.complete(k, 'zombie', response('late'), 60_000), false);
      assert.equal(await c.store.complete(k, 'heir', response('heir'), 60_000), true);
      const again = await claim(k, 'c');
      assert.ok(again.status === 'completed' && again.response.body.toString() === 'heir');
    },
    timeout,
  );

  it(
    'deletes nothing at a key never claimed, and says so',
    async () => {
      const k = key();
      assert.equal(await c.store.delete(k), false);
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
        assert.equal(await c.store.delete(k), true);
        await seen.wait();
        assert.equal(seen.last, undefined, 'a delete hands over no response');
        assert.deepEqual(await claim(k, 'b'), { status: 'claimed' });
        assert.equal(await c.store.complete(k, 'a', response('late'), 60_000), false);
      } finally {
        unwatch();
      }
    },
    timeout,
  );
}
