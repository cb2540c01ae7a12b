import { strict as assert } from 'node:assert';
import type { ListedRecord, ListedState } from '../stores/record-listing';
import type { ListingKit } from './store-contract-listing-support';
import { type ContractContext, response } from './store-contract-support';

/** Listing queries: filters (route, age), order, pages and their cursor, counts, and what is forgotten. */
export function listingQueryContract(c: ContractContext, kit: ListingKit): void {
  const {
    it,
    lease,
    lists,
    steps,
    space,
    keyIn,
    about,
    claim,
    step,
    list,
    keysOf,
    everywhere,
    nowhere,
    until,
    halfDone,
    crashed,
    gone,
  } = kit;

  it('filters by route', async () => {
    if (!lists()) return;
    const p = space();
    const [pay, ship] = [keyIn(p), keyIn(p)];
    await claim(pay, 'a', { about: about('POST /payments') });
    await claim(ship, 'a', { about: about('POST /shipments') });
    await claim(keyIn(p), 'a');
    assert.deepEqual(keysOf(await list(p, 'running', { route: 'POST /payments' })), [pay]);
    await c.store.complete(ship, 'a', response('done'), 60_000);
    assert.deepEqual(keysOf(await list(p, 'completed', { route: 'POST /shipments' })), [ship]);
    assert.deepEqual(keysOf(await list(p, 'completed', { route: 'POST /payments' })), []);
    assert.deepEqual(keysOf(await list(p, 'running', { route: 'POST /pay' })), []);
  });

  it('filters by age (minAgeMs, maxAgeMs) in every state', async () => {
    if (!lists()) return;
    const p = space();
    const make = async (state: ListedState) => {
      if (state === 'running') {
        const k = keyIn(p);
        await claim(k, 'a');
        return k;
      }
      if (state === 'completed') {
        const k = keyIn(p);
        await claim(k, 'a');
        await c.store.complete(k, 'a', response('done'), 60_000);
        return k;
      }
      return state === 'half_done' ? halfDone(p) : crashed(p);
    };
    // The stuck record first: making one waits a lease, which would age the others.
    const states: ListedState[] = steps()
      ? ['stuck', 'running', 'half_done', 'completed']
      : ['stuck', 'running', 'completed'];
    // Old ones twice the line between them older than young ones, each young one checked as
    // soon as it is made. The line: 2 leases, or more where a listing takes long (on a real
    // clock, a Cluster on a busy machine).
    const started = Date.now();
    await list(p, 'running');
    const line = Math.max(lease * 2, (Date.now() - started) * 4);
    const old: string[] = [];
    for (const state of states) old.push(await make(state));
    await c.advanceTime(line * 2);
    for (const [i, state] of states.entries()) {
      const making = Date.now();
      const young = await make(state);
      if (state === 'stuck') {
        // It waited a lease to die (longer on a busy machine), and its age runs from its claim:
        // older than that only. The old one is older by the line twice over.
        const aged = { minAgeMs: line + Math.max(lease, Date.now() - making) };
        assert.deepEqual(keysOf(await list(p, state, aged)), [old[i]], `${state} min`);
        continue;
      }
      const fresh = { maxAgeMs: line };
      assert.deepEqual(keysOf(await list(p, state, fresh)), [young], `${state} max`);
      const aged = { minAgeMs: line };
      assert.deepEqual(keysOf(await list(p, state, aged)), [old[i]], `${state} min`);
      const both = { minAgeMs: line, maxAgeMs: lease * 100 };
      assert.deepEqual(keysOf(await list(p, state, both)), [old[i]], `${state} both`);
    }
  });

  it('orders newest first by default, oldest first on request', async () => {
    if (!lists()) return;
    const p = space();
    const keys = [keyIn(p), keyIn(p), keyIn(p)];
    for (const k of keys) {
      await claim(k, 'a');
      await c.advanceTime(20);
    }
    assert.deepEqual(keysOf(await list(p, 'running')), [...keys].reverse());
    assert.deepEqual(keysOf(await list(p, 'running', { order: 'oldest' })), keys);
    for (const k of [...keys].reverse()) {
      await c.store.complete(k, 'a', response('done'), 60_000);
      await c.advanceTime(20);
    }
    assert.deepEqual(keysOf(await list(p, 'completed')), keys);
    assert.deepEqual(keysOf(await list(p, 'completed', { order: 'newest' })), keys);
    assert.deepEqual(keysOf(await list(p, 'completed', { order: 'oldest' })), [...keys].reverse());
  });

  it('pages with a cursor over every item exactly once, ties included, in both orders', async () => {
    if (!lists()) return;
    const p = space();
    // Claimed and completed at once: many share a millisecond.
    const keys = Array.from({ length: 7 }, () => keyIn(p));
    await Promise.all(keys.map((k) => claim(k, 'a', { about: about('POST /bulk') })));
    for (const state of ['running', 'completed'] as const) {
      if (state === 'completed') {
        await Promise.all(keys.map((k) => c.store.complete(k, 'a', response('done'), 60_000)));
      }
      for (const order of ['newest', 'oldest'] as const) {
        const seen: ListedRecord[] = [];
        let cursor: string | undefined;
        let pages = 0;
        do {
          const page = await list(p, state, { order, limit: 3, cursor });
          assert.ok(page.items.length <= 3, `limit: ${page.items.length}`);
          seen.push(...page.items);
          cursor = page.cursor;
          assert.ok(++pages <= 4, `${state} ${order}: more pages than items allow`);
        } while (cursor !== undefined);
        assert.equal(pages, 3, `${state} ${order}: 7 items in pages of 3`);
        assert.deepEqual([...seen.map((i) => i.key)].sort(), [...keys].sort(), `${state} ${order}`);
        for (let i = 1; i < seen.length; i++) {
          const [a, b] = [seen[i - 1].since, seen[i].since];
          assert.ok(order === 'newest' ? a >= b : a <= b, `${state} ${order}: ${a} then ${b}`);
        }
      }
    }
  });

  it('pages over half-done runs however they ended (released, died)', async () => {
    if (!steps()) return;
    const p = space();
    // Apart in time, so that the order is known: ties are ordered by key.
    const runs: string[] = [];
    for (const make of [
      () => crashed(p, { names: ['order'] }),
      () => crashed(p, { names: ['order'], about: about('POST /orders') }),
      () => halfDone(p),
      () => halfDone(p),
    ]) {
      runs.push(await make());
      await c.advanceTime(20);
    }
    for (const order of ['newest', 'oldest'] as const) {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await list(p, 'half_done', { order, limit: 1, cursor });
        seen.push(...keysOf(page));
        cursor = page.cursor;
      } while (cursor !== undefined && seen.length <= 4);
      assert.deepEqual(seen, order === 'oldest' ? runs : [...runs].reverse(), order);
    }
  });

  it('returns at most limit items, and a cursor when there are more', async () => {
    if (!lists()) return;
    const p = space();
    for (let i = 0; i < 5; i++) await claim(keyIn(p), 'a');
    const page = await list(p, 'running', { limit: 2 });
    assert.equal(page.items.length, 2);
    assert.equal(typeof page.cursor, 'string');
    const all = await list(p, 'running', { limit: 5 });
    assert.equal(all.items.length, 5);
    assert.equal(all.cursor, undefined, 'no cursor when nothing follows');
  });

  it('counts the records in each state (countRecords), stuckAfterMs too', async () => {
    if (!lists()) return;
    const p = space();
    assert.deepEqual(await c.store.countRecords!(p), {
      running: 0,
      stuck: 0,
      half_done: 0,
      completed: 0,
    });
    await crashed(p);
    if (steps()) await halfDone(p);
    await claim(keyIn(p), 'a');
    for (let i = 0; i < 2; i++) {
      const k = keyIn(p);
      await claim(k, 'a');
      await c.store.complete(k, 'a', response('done'), 60_000);
    }
    const half = steps() ? 1 : 0;
    const counts = { running: 1, stuck: 1, half_done: half, completed: 2 };
    assert.deepEqual(await c.store.countRecords!(p), counts);
    await c.advanceTime(lease);
    const held = await c.store.countRecords!(p, Math.floor(lease / 2));
    assert.deepEqual(held, { ...counts, running: 0, stuck: 2 });
  });

  it('keeps prefixes apart: lists and counts see their own records only', async () => {
    if (!lists()) return;
    const [p, q] = [space(), space()];
    const [kp, kq] = [keyIn(p), keyIn(q)];
    await claim(kp, 'a', { about: about('POST /p') });
    await claim(kq, 'a', { about: about('POST /q') });
    await c.store.complete(kq, 'a', response('done'), 60_000);
    assert.deepEqual(await everywhere(p), { ...nowhere, running: [kp] });
    assert.deepEqual(await everywhere(q), { ...nowhere, completed: [kq] });
    const counts = await c.store.countRecords!(q);
    assert.deepEqual(counts, { running: 0, stuck: 0, half_done: 0, completed: 1 });
  });

  it('lists a deleted record nowhere, whatever its state', async () => {
    if (!lists()) return;
    const p = space();
    const running = keyIn(p);
    await claim(running, 'a');
    const completed = keyIn(p);
    await claim(completed, 'a');
    await c.store.complete(completed, 'a', response('done'), 60_000);
    const live = [running, completed];
    if (steps()) live.push(await halfDone(p), await crashed(p, { names: ['order'] }));
    for (const k of live) assert.equal(await c.store.delete(k), true, k);
    // A stuck claim's record is gone with its lease: delete() may answer false, and unlists it.
    await c.store.delete(await crashed(p));
    assert.deepEqual(await everywhere(p), nowhere);
    const counts = await c.store.countRecords!(p);
    assert.deepEqual(counts, { running: 0, stuck: 0, half_done: 0, completed: 0 });
  });

  it('forgets a completed record after its ttl, and a half-done run when its steps expire', async () => {
    if (!lists()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a');
    await c.store.complete(k, 'a', response('short'), lease);
    assert.deepEqual(keysOf(await list(p, 'completed')), [k]);
    await until(gone(p, 'completed', k), 'the completed record to expire');
    assert.equal((await c.store.countRecords!(p)).completed, 0);
    if (!steps()) return;
    const h = keyIn(p);
    await claim(h, 'a', { resumable: true });
    await c.store.recordStep!(h, 'a', step(0, 'order'), lease);
    await c.store.release(h, 'a');
    assert.deepEqual(keysOf(await list(p, 'half_done')), [h]);
    await until(gone(p, 'half_done', h), 'the steps to expire');
    assert.deepEqual(await everywhere(p), nowhere);
    assert.equal((await c.store.countRecords!(p)).half_done, 0);
  });
}
