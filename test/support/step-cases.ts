import { randomUUID } from 'node:crypto';
import type { ClaimResult, IdempotencyStore, StoredStep } from '../../lib';

/**
 * The steps part of the store contract (issue 35), as each built-in store must meet it on its
 * real server: recordStep fenced by the owner token, steps that outlive a release and a lease,
 * resumable claims that return them (in index order, on every built-in store), key_reused for
 * steps of another payload, clearSteps, delete and inspect. The exported contract suite gains
 * the same cases; these run the Redis and SQL stores against them meanwhile, and go on covering
 * what is particular to them (Cluster, Sentinel, a client's keyPrefix).
 */
export interface StepCasesOptions {
  name: string;
  createStore: () => Promise<IdempotencyStore>;
  closeStore: (store: IdempotencyStore) => Promise<void>;
  /** Prefix of the keys (a Cluster needs none: keys carry a hash tag). */
  keyPrefix?: string;
  /** The short lease of the tests that let one run out, in ms. Default 300. */
  leaseMs?: number;
}

const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A step whose result holds bytes that are not UTF-8, so that a body must round-trip as bytes. */
export function step(index: number, name: string, text = name): StoredStep {
  return {
    index,
    name,
    result: {
      meta: JSON.stringify({ k: 'json', index }),
      body: Buffer.concat([Buffer.from(text), Buffer.from([0, 0xff, 0xfe])]),
    },
  };
}

/** The steps of a claim, as index/name/body text, for assertions. */
export function stepsOf(result: ClaimResult): { index: number; name: string; body: string }[] {
  if (result.status !== 'claimed') throw new Error(`not claimed: ${JSON.stringify(result)}`);
  return (result.steps ?? []).map((s) => ({
    index: s.index,
    name: s.name,
    body: s.result.body.subarray(0, -3).toString(),
  }));
}

export function runStepCases(options: StepCasesOptions): void {
  const lease = options.leaseMs ?? 300;
  const ttl = 60_000;
  const key = () => `${options.keyPrefix ?? 'steps:'}{${randomUUID()}}`;
  let store: IdempotencyStore;
  const record = (k: string, token: string, s: StoredStep, ttlMs = ttl) =>
    store.recordStep!(k, token, s, ttlMs);
  const claim = (k: string, token: string, fingerprint = 'fp', leaseMs = 60_000) =>
    store.claim(k, { token, fingerprint, leaseMs, resumable: true });

  describe(`steps: ${options.name}`, () => {
    beforeAll(async () => {
      store = await options.createStore();
    }, 60_000);
    afterAll(() => options.closeStore(store), 60_000);

    it('returns the steps an owner recorded, in index order, after a release', async () => {
      const k = key();
      expect(await claim(k, 'a')).toEqual({ status: 'claimed' });
      // Recorded out of order, as steps run with Promise.all land.
      expect(await record(k, 'a', step(2, 'email'))).toBe(true);
      expect(await record(k, 'a', step(0, 'order'))).toBe(true);
      expect(await record(k, 'a', step(1, 'charge'))).toBe(true);
      expect(await store.release(k, 'a')).toBe(true);
      const again = await claim(k, 'b');
      expect(stepsOf(again)).toEqual([
        { index: 0, name: 'order', body: 'order' },
        { index: 1, name: 'charge', body: 'charge' },
        { index: 2, name: 'email', body: 'email' },
      ]);
      const [first] = again.status === 'claimed' ? again.steps! : [];
      expect(first.result).toEqual(step(0, 'order').result);
    });

    it('never returns steps to a claim that is not resumable', async () => {
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order'));
      await store.release(k, 'a');
      expect(await store.claim(k, { token: 'b', fingerprint: 'fp', leaseMs: 60_000 })).toEqual({
        status: 'claimed',
      });
    });

    it('replaces a step recorded again at its index', async () => {
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order', 'first'));
      await record(k, 'a', step(0, 'order', 'second'));
      await store.release(k, 'a');
      expect(stepsOf(await claim(k, 'b'))).toEqual([{ index: 0, name: 'order', body: 'second' }]);
    });

    it('refuses a step from a token that does not own the record', async () => {
      const k = key();
      await claim(k, 'owner');
      expect(await record(k, 'intruder', step(0, 'order'))).toBe(false);
      expect(await record(k, 'owner', step(1, 'charge'))).toBe(true);
      await store.release(k, 'owner');
      expect(await record(k, 'owner', step(2, 'after-release'))).toBe(false);
      expect(stepsOf(await claim(k, 'next'))).toEqual([
        { index: 1, name: 'charge', body: 'charge' },
      ]);
    });

    it('keeps steps past an expired lease and fences the old owner once another took over', async () => {
      const k = key();
      await claim(k, 'zombie', 'fp', lease);
      await record(k, 'zombie', step(0, 'order'));
      await wait(lease + 150);
      const heir = await claim(k, 'heir');
      expect(stepsOf(heir)).toEqual([{ index: 0, name: 'order', body: 'order' }]);
      expect(await record(k, 'zombie', step(1, 'charge'))).toBe(false);
      expect(await record(k, 'heir', step(1, 'charge', 'heir'))).toBe(true);
      await store.release(k, 'heir');
      expect(stepsOf(await claim(k, 'third')).map((s) => s.body)).toEqual(['order', 'heir']);
    });

    it('answers key_reused to a resumable claim of another payload, and leaves the key free', async () => {
      const k = key();
      await claim(k, 'a', 'one');
      await record(k, 'a', step(0, 'order'));
      await store.release(k, 'a');
      expect(await claim(k, 'b', 'two')).toEqual({ status: 'key_reused' });
      expect(await store.inspect(k)).toEqual({
        state: 'absent',
        steps: [{ index: 0, name: 'order' }],
      });
      expect(stepsOf(await claim(k, 'c', 'one'))).toHaveLength(1);
    });

    it('deletes the steps with a completion that clears them, and only then', async () => {
      const kept = key();
      await claim(kept, 'a');
      await record(kept, 'a', step(0, 'order'));
      // Completed for a moment only: once it is gone, the steps the completion left show.
      expect(await store.complete(kept, 'a', step(9, 'r').result, lease)).toBe(true);
      await wait(lease + 150);
      expect(stepsOf(await claim(kept, 'b'))).toHaveLength(1);

      const cleared = key();
      await claim(cleared, 'a');
      await record(cleared, 'a', step(0, 'order'));
      const done = await store.complete(cleared, 'a', step(9, 'r').result, lease, {
        clearSteps: true,
      });
      expect(done).toBe(true);
      await wait(lease + 150);
      expect(await claim(cleared, 'b')).toEqual({ status: 'claimed' });
    });

    it('keeps the steps when a completion that would clear them is refused', async () => {
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order'));
      const refused = await store.complete(k, 'intruder', step(9, 'r').result, ttl, {
        clearSteps: true,
      });
      expect(refused).toBe(false);
      await store.release(k, 'a');
      expect(stepsOf(await claim(k, 'b'))).toHaveLength(1);
    });

    it('shows operators the steps of a pending and of an absent record, and deletes them', async () => {
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(1, 'charge'));
      await record(k, 'a', step(0, 'order'));
      const pending = await store.inspect(k);
      expect(pending).toMatchObject({
        state: 'pending',
        steps: [
          { index: 0, name: 'order' },
          { index: 1, name: 'charge' },
        ],
      });
      await store.release(k, 'a');
      expect(await store.inspect(k)).toEqual({
        state: 'absent',
        steps: [
          { index: 0, name: 'order' },
          { index: 1, name: 'charge' },
        ],
      });
      // No live record, but steps: they go, and count as something deleted.
      expect(await store.delete(k)).toBe(true);
      expect(await store.inspect(k)).toEqual({ state: 'absent' });
      expect(await store.delete(k)).toBe(false);
      expect(await claim(k, 'b')).toEqual({ status: 'claimed' });

      await record(k, 'b', step(0, 'order'));
      expect(await store.delete(k)).toBe(true);
      expect(await store.inspect(k)).toEqual({ state: 'absent' });
      expect(await record(k, 'b', step(1, 'charge'))).toBe(false);
    });

    it('shows no steps for a completed record', async () => {
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order'));
      await store.complete(k, 'a', step(9, 'r').result, ttl, { clearSteps: true });
      const completed = await store.inspect(k);
      expect(completed.state).toBe('completed');
      expect(completed).not.toHaveProperty('steps');
    });

    it('forgets steps after their ttl', async () => {
      const k = key();
      await claim(k, 'a');
      await record(k, 'a', step(0, 'order'), lease);
      await store.release(k, 'a');
      await wait(lease + 150);
      expect(await claim(k, 'b')).toEqual({ status: 'claimed' });
    });

    it('keeps empty and 1 MiB step results intact', async () => {
      const k = key();
      await claim(k, 'a');
      const big = { meta: 'm', body: Buffer.alloc(1024 * 1024, 7) };
      const empty = { meta: '', body: Buffer.alloc(0) };
      await record(k, 'a', { index: 0, name: 'big', result: big });
      await record(k, 'a', { index: 1, name: 'empty', result: empty });
      await store.release(k, 'a');
      const again = await claim(k, 'b');
      const steps = again.status === 'claimed' ? again.steps! : [];
      expect(steps.map((s) => s.name)).toEqual(['big', 'empty']);
      expect(Buffer.from(steps[0].result.body).equals(big.body)).toBe(true);
      expect(steps[1].result).toEqual({ meta: '', body: Buffer.alloc(0) });
    });
  });
}
