import { strict as assert } from 'node:assert';
import type { ClaimResult, StoredStep } from '../stores/idempotency.store';
import { type ContractContext, response } from './store-contract-support';

/** A step whose result is `text` (and the bytes `extra`). */
const step = (index: number, name: string, text = name, extra: number[] = []): StoredStep => ({
  index,
  name,
  result: response(text, extra),
});

/** The steps of a claim, by index, as `index:name:body` (the order a store returns is free). */
function stepsOf(result: ClaimResult): string[] {
  assert.equal(result.status, 'claimed', JSON.stringify(result));
  const steps = result.status === 'claimed' ? (result.steps ?? []) : [];
  return [...steps]
    .sort((a, b) => a.index - b.index)
    .map(({ index, name, result: stored }) => `${index}:${name}:${stored.body.toString('latin1')}`);
}

/**
 * Steps (`recordStep`, resumable claims, `clearSteps`): what resumable handlers need of a store.
 * Each case passes without checking anything for a store that does not implement recordStep
 * (such a store cannot serve `resumable`, which the module refuses at boot); the first case says
 * which of the two the store is.
 */
export function stepContract(c: ContractContext, operatorMethods: boolean): void {
  const { it, timeout, lease, key } = c;
  const records = () => typeof c.store.recordStep === 'function';
  const claim = (k: string, token: string, fingerprint = 'fp', leaseMs = 60_000) =>
    c.store.claim(k, { token, fingerprint, leaseMs, resumable: true });
  const record = (k: string, token: string, s: StoredStep, ttlMs = 60_000) =>
    c.store.recordStep!(k, token, s, ttlMs);

  it(
    'records steps (recordStep), or has neither recordStep nor recordStepInTransaction (the step cases then check nothing)',
    async () => {
      if (records()) return;
      const inTransaction = (c.store as { recordStepInTransaction?: unknown })
        .recordStepInTransaction;
      assert.equal(inTransaction, undefined, 'recordStepInTransaction without recordStep');
    },
    timeout,
  );

  it(
    'returns no steps to a resumable claim of a key never used',
    async () => {
      if (!records()) return;
      assert.deepEqual(stepsOf(await claim(key(), 'a')), []);
    },
    timeout,
  );

  it(
    'records steps under the claim; a resumable claim after a release returns them, byte for byte',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'a');
      assert.equal(await record(k, 'a', step(0, 'order', 'row 1', [0, 255, 10])), true);
      assert.equal(await record(k, 'a', step(1, 'charge', 'ch_1')), true);
      assert.equal(await c.store.release(k, 'a'), true);
      const resumed = await claim(k, 'b');
      assert.deepEqual(stepsOf(resumed), ['0:order:row 1\0\xff\n', '1:charge:ch_1']);
      const steps = resumed.status === 'claimed' ? (resumed.steps ?? []) : [];
      assert.equal(steps.find((s) => s.index === 0)?.result.meta, response('row 1').meta);
    },
    timeout,
  );

  it(
    'keeps steps recorded at any index, in any order, and replaces one recorded again at its index',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'a');
      assert.equal(await record(k, 'a', step(2, 'event')), true);
      assert.equal(await record(k, 'a', step(0, 'order')), true);
      assert.equal(await record(k, 'a', step(0, 'order', 'again')), true);
      await c.store.release(k, 'a');
      assert.deepEqual(stepsOf(await claim(k, 'b')), ['0:order:again', '2:event:event']);
    },
    timeout,
  );

  it(
    'gives no steps to a claim that does not resume, and leaves them for the next one that does',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order'));
      await c.store.release(k, 'a');
      assert.deepEqual(await c.claim(k, 'b'), { status: 'claimed' });
      await c.store.release(k, 'b');
      assert.deepEqual(stepsOf(await claim(k, 'c')), ['0:order:order']);
    },
    timeout,
  );

  it(
    'refuses a step from a token that does not own the record (fenced), before and after a takeover',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'zombie', 'fp', lease);
      assert.equal(await record(k, 'intruder', step(0, 'order', 'intruder')), false);
      assert.equal(await record(k, 'zombie', step(0, 'order')), true);
      await c.advanceTime(lease + 100);
      // The steps outlive the lease: the heir resumes after them.
      assert.deepEqual(stepsOf(await claim(k, 'heir')), ['0:order:order']);
      assert.equal(await record(k, 'zombie', step(1, 'charge', 'zombie')), false);
      assert.equal(await record(k, 'heir', step(1, 'charge', 'heir')), true);
      assert.equal(
        await c.store.complete(k, 'zombie', response('late'), 60_000, { clearSteps: true }),
        false,
      );
      await c.store.release(k, 'heir');
      assert.deepEqual(stepsOf(await claim(k, 'next')), ['0:order:order', '1:charge:heir']);
    },
    timeout,
  );

  it(
    'refuses a step under a released, completed or deleted record',
    async () => {
      if (!records() || !operatorMethods) return;
      const [released, completed, deleted] = [key(), key(), key()];
      for (const k of [released, completed, deleted]) await claim(k, 'a');
      await c.store.release(released, 'a');
      await c.store.complete(completed, 'a', response('done'), 60_000);
      await c.store.delete(deleted);
      for (const k of [released, completed, deleted]) {
        assert.equal(await record(k, 'a', step(0, 'late')), false);
      }
    },
    timeout,
  );

  it(
    'answers key_reused to a resumable claim of another fingerprint while steps remain',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'a', 'one');
      await record(k, 'a', step(0, 'order'));
      await c.store.release(k, 'a');
      assert.deepEqual(await claim(k, 'b', 'two'), { status: 'key_reused' });
      assert.deepEqual(stepsOf(await claim(k, 'c', 'one')), ['0:order:order']);
    },
    timeout,
  );

  it(
    'deletes the steps with a completion that clears them, and only then',
    async () => {
      if (!records()) return;
      const [cleared, kept] = [key(), key()];
      for (const k of [cleared, kept]) {
        await claim(k, 'a');
        await record(k, 'a', step(0, 'order'));
      }
      const done = response('done');
      assert.equal(await c.store.complete(cleared, 'a', done, lease, { clearSteps: true }), true);
      assert.equal(await c.store.complete(kept, 'a', done, lease), true);
      assert.equal((await claim(cleared, 'b')).status, 'completed');
      await c.advanceTime(lease + 100); // the completed records expire; steps last 60 s
      assert.deepEqual(stepsOf(await claim(cleared, 'c')), []);
      assert.deepEqual(stepsOf(await claim(kept, 'c')), ['0:order:order']);
    },
    timeout,
  );

  it(
    'forgets steps ttl after they were recorded',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'a', 'fp', lease * 10);
      await record(k, 'a', step(0, 'order'), lease);
      await c.advanceTime(lease + 100);
      assert.equal(await c.store.release(k, 'a'), true);
      assert.deepEqual(stepsOf(await claim(k, 'b')), []);
    },
    timeout,
  );

  it(
    'inspects the steps of a pending record, and of a released one, by index and name only',
    async () => {
      if (!records() || !operatorMethods) return;
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(1, 'charge'));
      await record(k, 'a', step(0, 'order'));
      const pending = await c.store.inspect(k);
      assert.equal(pending.state, 'pending');
      const sorted = (steps: { index: number }[] = []) =>
        [...steps].sort((x, y) => x.index - y.index);
      const expected = [
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ];
      assert.deepEqual(sorted(pending.state === 'pending' ? pending.steps : []), expected);
      await c.store.release(k, 'a');
      const absent = await c.store.inspect(k);
      assert.equal(absent.state, 'absent');
      assert.deepEqual(sorted(absent.state === 'absent' ? absent.steps : []), expected);
      // A record without steps inspects as before.
      const plain = key();
      await claim(plain, 'a');
      const seen = await c.store.inspect(plain);
      assert.ok(seen.state === 'pending' && !seen.steps?.length, JSON.stringify(seen));
    },
    timeout,
  );

  it(
    'deletes a record with its steps, and steps whose record is gone (returning true)',
    async () => {
      if (!records() || !operatorMethods) return;
      const [pending, released] = [key(), key()];
      for (const k of [pending, released]) {
        await claim(k, 'a');
        await record(k, 'a', step(0, 'order'));
      }
      await c.store.release(released, 'a');
      assert.equal(await c.store.delete(pending), true);
      assert.equal(await c.store.delete(released), true);
      assert.equal(await c.store.delete(released), false);
      for (const k of [pending, released]) {
        const seen = await c.store.inspect(k);
        assert.ok(seen.state === 'absent' && !seen.steps?.length, JSON.stringify(seen));
        assert.deepEqual(stepsOf(await claim(k, 'b')), []);
      }
    },
    timeout,
  );

  it(
    'answers a resumable claim of a pending or completed record as any other claim',
    async () => {
      if (!records()) return;
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order'));
      assert.equal((await claim(k, 'b')).status, 'in_progress');
      assert.equal(await c.store.complete(k, 'a', response('done'), 60_000), true);
      const again = await claim(k, 'b');
      assert.ok(again.status === 'completed' && again.response.body.toString() === 'done');
    },
    timeout,
  );
}
