import { strict as assert } from 'node:assert';
import { listingQueryContract } from './store-contract-listing-queries';
import { listingKit, plausibleTime, SLACK } from './store-contract-listing-support';
import { type ContractContext, response } from './store-contract-support';

/**
 * Listing (`list`, `countRecords`, `markAbandoned`): what operators find a store's records by.
 * Each case has a key prefix of its own, so that its lists and counts see its records only, and
 * passes without checking anything for a store that does not implement `list`; the first case
 * says which of the two the store is. Cases about steps also need `recordStep`. Test names start
 * with `listing:` (`-t listing:` runs them alone). Here: each state, how records move between
 * them, and the abandoned mark; the queries (filters, order, pages, counts) are in
 * store-contract-listing-queries.ts.
 */
export function listingContract(c: ContractContext): void {
  const kit = listingKit(c);
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
    only,
    everywhere,
    nowhere,
    stepNames,
    until,
    storeTime,
    listed,
    halfDone,
    crashed,
  } = kit;

  it('lists records (list), or has none of list, countRecords and markAbandoned (the listing cases then check nothing)', async () => {
    if (lists()) {
      assert.equal(typeof c.store.countRecords, 'function', 'list without countRecords');
      assert.equal(typeof c.store.markAbandoned, 'function', 'list without markAbandoned');
      return;
    }
    assert.equal(c.store.countRecords, undefined, 'countRecords without list');
    assert.equal(c.store.markAbandoned, undefined, 'markAbandoned without list');
  });

  it('lists a live claim as running: its about, claim time and lease left', async () => {
    if (!lists()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a', { about: about('POST /payments', 'sealed:label') });
    const item = await only(p, 'running');
    assert.equal(item.key, k);
    assert.equal(item.state, 'running');
    assert.deepEqual(item.about, { route: 'POST /payments', label: 'sealed:label' });
    assert.ok(plausibleTime(item.since), `since ${item.since}`);
    const now = await storeTime();
    assert.ok(now >= item.since && now - item.since < SLACK, `since ${item.since}, now ${now}`);
    assert.ok(item.leaseMsLeft! > 50_000 && item.leaseMsLeft! <= 60_000, `${item.leaseMsLeft}`);
    assert.deepEqual(item.steps ?? [], []);
    assert.equal(item.meta, undefined);
    assert.deepEqual(await everywhere(p), { ...nowhere, running: [k] });
  });

  it('lists the steps a running claim recorded, by index and name', async () => {
    if (!steps()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a', { about: about('POST /orders'), resumable: true });
    await c.store.recordStep!(k, 'a', step(1, 'charge'), 60_000);
    await c.store.recordStep!(k, 'a', step(0, 'order'), 60_000);
    assert.deepEqual(stepNames(await only(p, 'running')), ['0:order', '1:charge']);
  });

  it('lists a record claimed without about, without one', async () => {
    if (!lists()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a');
    const item = await only(p, 'running');
    assert.equal(item.key, k);
    assert.equal(item.about, undefined);
    assert.equal(await c.store.complete(k, 'a', response('done'), 60_000), true);
    const done = await only(p, 'completed');
    assert.equal(done.key, k);
    assert.equal(done.about, undefined);
  });

  it('lists a completed record with its meta and about, from its completion', async () => {
    if (!lists()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a', { about: about('POST /payments') });
    const claimed = (await only(p, 'running')).since;
    await c.advanceTime(lease);
    const stored = response('done');
    assert.equal(await c.store.complete(k, 'a', stored, 60_000), true);
    const item = await only(p, 'completed');
    assert.equal(item.key, k);
    assert.equal(item.state, 'completed');
    assert.deepEqual(item.about, about('POST /payments'));
    assert.equal(item.meta, stored.meta);
    assert.ok(plausibleTime(item.since), `since ${item.since}`);
    assert.ok(item.since >= claimed + lease / 2, `since ${item.since}, claimed ${claimed}`);
    assert.ok(item.since - claimed < lease + SLACK, `since ${item.since}, claimed ${claimed}`);
    assert.equal(item.leaseMsLeft, undefined);
    assert.deepEqual(item.steps ?? [], []);
    assert.deepEqual(await everywhere(p), { ...nowhere, completed: [k] });
  });

  it('lists a claim whose lease ran out, its process dead, as stuck with its about', async () => {
    if (!lists()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'dead', { about: about('POST /jobs'), leaseMs: lease });
    const running = await only(p, 'running');
    await until(listed(p, 'stuck', k), 'the lease to run out');
    const item = await only(p, 'stuck');
    assert.equal(item.state, 'stuck');
    assert.deepEqual(item.about, about('POST /jobs'));
    assert.equal(item.since, running.since, 'a stuck claim is as old as its claim');
    assert.ok(item.leaseMsLeft! <= 0, `leaseMsLeft ${item.leaseMsLeft}`);
    assert.deepEqual(await everywhere(p), { ...nowhere, stuck: [k] });
  });

  it('lists a live claim held longer than stuckAfterMs as stuck, and running without it', async () => {
    if (!lists()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a', { about: about('POST /slow') });
    await c.advanceTime(lease);
    const stuckAfterMs = Math.floor(lease / 2);
    assert.deepEqual(keysOf(await list(p, 'running', { stuckAfterMs })), []);
    const item = await only(p, 'stuck', { stuckAfterMs });
    assert.equal(item.key, k);
    assert.ok(item.leaseMsLeft! > 0, 'its lease is live');
    assert.deepEqual(keysOf(await list(p, 'running')), [k]);
    assert.deepEqual(keysOf(await list(p, 'running', { stuckAfterMs: 60_000 })), [k]);
    assert.deepEqual(keysOf(await list(p, 'stuck', { stuckAfterMs: 60_000 })), []);
  });

  it('lists a released run that recorded steps as half done, from its release', async () => {
    if (!steps()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'a', { about: about('POST /orders'), resumable: true });
    await c.store.recordStep!(k, 'a', step(0, 'order'), 60_000);
    await c.store.recordStep!(k, 'a', step(1, 'charge'), 60_000);
    const claimed = (await only(p, 'running')).since;
    await c.advanceTime(lease);
    assert.equal(await c.store.release(k, 'a'), true);
    const item = await only(p, 'half_done');
    assert.equal(item.key, k);
    assert.equal(item.state, 'half_done');
    assert.deepEqual(item.about, about('POST /orders'));
    assert.deepEqual(stepNames(item), ['0:order', '1:charge']);
    assert.ok(item.since >= claimed + lease / 2, `since ${item.since}, claimed ${claimed}`);
    assert.ok(!item.reported, 'not reported yet');
    assert.deepEqual(await everywhere(p), { ...nowhere, half_done: [k] });
  });

  it('lists a run that recorded steps and died as half done, from its lease running out', async () => {
    if (!steps()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'dead', { about: about('POST /orders'), leaseMs: lease, resumable: true });
    await c.store.recordStep!(k, 'dead', step(0, 'order'), 60_000);
    const claimed = (await only(p, 'running')).since;
    await until(listed(p, 'half_done', k), 'the lease to run out');
    const item = await only(p, 'half_done');
    assert.deepEqual(item.about, about('POST /orders'));
    assert.deepEqual(stepNames(item), ['0:order']);
    assert.ok(
      item.since >= claimed + lease / 2 && item.since <= claimed + lease + SLACK,
      `since ${item.since}: claimed ${claimed}, lease ${lease}`,
    );
    assert.deepEqual(await everywhere(p), { ...nowhere, half_done: [k] });
  });

  it('counts a run that died from its last lease extension', async () => {
    if (!steps()) return;
    const p = space();
    const k = keyIn(p);
    await claim(k, 'dead', { leaseMs: lease, resumable: true });
    await c.store.recordStep!(k, 'dead', step(0, 'order'), 60_000);
    const claimed = (await only(p, 'running')).since;
    // A quarter in: a busy machine (real time, on Redis) has three quarters of the lease left
    // to reach the extension before the claim lapses.
    await c.advanceTime(Math.floor(lease / 4));
    assert.equal(await c.store.extend(k, 'dead', lease), true);
    await until(listed(p, 'half_done', k), 'the extended lease to run out');
    const { since } = await only(p, 'half_done');
    assert.ok(since >= claimed + lease * 1.2, `since ${since}: claimed ${claimed}, lease ${lease}`);
  });

  it('lists a released run without steps nowhere, nor a claim that was refused', async () => {
    if (!lists()) return;
    const p = space();
    const [released, reused] = [keyIn(p), keyIn(p)];
    await claim(released, 'a', { about: about('POST /a') });
    assert.equal(await c.store.release(released, 'a'), true);
    assert.deepEqual(await everywhere(p), nowhere);
    // Claims that change nothing (in progress, completed, key reused, its own again) list nothing new.
    await claim(reused, 'a', { about: about('POST /first') });
    const first = await only(p, 'running');
    await c.advanceTime(20);
    assert.equal(
      (await claim(reused, 'b', { about: about('POST /second') })).status,
      'in_progress',
    );
    const other = { about: about('POST /second'), fingerprint: 'other' };
    assert.equal((await claim(reused, 'b', other)).status, 'key_reused');
    assert.equal((await claim(reused, 'a', { about: about('POST /again') })).status, 'claimed');
    const again = await only(p, 'running');
    assert.deepEqual([again.about, again.since], [about('POST /first'), first.since]);
    assert.equal(await c.store.complete(reused, 'a', response('done'), 60_000), true);
    assert.equal((await claim(reused, 'c', { about: about('POST /third') })).status, 'completed');
    assert.equal((await claim(reused, 'c', other)).status, 'key_reused');
    assert.deepEqual((await only(p, 'completed')).about, about('POST /first'));
  });

  it('makes a half-done run running again when a retry resumes it, then completed', async () => {
    if (!steps()) return;
    const p = space();
    const k = await halfDone(p, ['order', 'charge']);
    const resumed = await claim(k, 'retry', { about: about('POST /orders'), resumable: true });
    assert.equal(resumed.status, 'claimed');
    const item = await only(p, 'running');
    assert.equal(item.key, k);
    assert.deepEqual(stepNames(item), ['0:order', '1:charge']);
    assert.deepEqual(await everywhere(p), { ...nowhere, running: [k] });
    const done = response('done');
    assert.equal(await c.store.complete(k, 'retry', done, 60_000, { clearSteps: true }), true);
    assert.deepEqual(await everywhere(p), { ...nowhere, completed: [k] });
  });

  it('makes a stuck claim running again when the key is claimed anew', async () => {
    if (!lists()) return;
    const p = space();
    const k = await crashed(p, { about: about('POST /jobs') });
    await claim(k, 'heir', { about: about('POST /jobs') });
    assert.deepEqual(await everywhere(p), { ...nowhere, running: [k] });
    assert.equal(await c.store.release(k, 'heir'), true);
    assert.deepEqual(await everywhere(p), nowhere);
  });

  it('marks a half-done run abandoned once, only when it ended at or before the time given', async () => {
    if (!steps()) return;
    const p = space();
    const k = await halfDone(p);
    const { since } = await only(p, 'half_done');
    assert.equal(await c.store.markAbandoned!(k, since - 1), false, 'it ended later');
    assert.equal((await only(p, 'half_done')).reported ?? false, false);
    assert.equal(await c.store.markAbandoned!(k, since), true);
    assert.equal(await c.store.markAbandoned!(k, since), false, 'reported already');
    assert.equal(await c.store.markAbandoned!(k, since + 60_000), false, 'reported already');
    const item = await only(p, 'half_done');
    assert.equal(item.reported, true);
    assert.equal(item.since, since, 'reporting changes no time');
  });

  it('marks nothing abandoned that is not half done', async () => {
    if (!lists()) return;
    const p = space();
    const later = (await storeTime()) + 3_600_000;
    const running = keyIn(p);
    await claim(running, 'a');
    const completed = keyIn(p);
    await claim(completed, 'a');
    await c.store.complete(completed, 'a', response('done'), 60_000);
    const stuck = await crashed(p);
    for (const k of [running, completed, stuck, keyIn(p)]) {
      assert.equal(await c.store.markAbandoned!(k, later), false, k);
    }
    if (!steps()) return;
    const resumed = await halfDone(p);
    await claim(resumed, 'retry', { resumable: true });
    assert.equal(await c.store.markAbandoned!(resumed, later), false, 'resumed');
  });

  it('marks a half-done run abandoned for exactly one of 10 concurrent callers', async () => {
    if (!steps()) return;
    const p = space();
    const k = await halfDone(p);
    const later = (await storeTime()) + 3_600_000;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => c.store.markAbandoned!(k, later)),
    );
    assert.equal(answers.filter(Boolean).length, 1, JSON.stringify(answers));
  });

  it('clears the abandoned mark when a retry claims the key again', async () => {
    if (!steps()) return;
    const p = space();
    const k = await halfDone(p);
    const later = (await storeTime()) + 3_600_000;
    assert.equal(await c.store.markAbandoned!(k, later), true);
    await claim(k, 'retry', { about: about('POST /orders'), resumable: true });
    assert.equal(await c.store.recordStep!(k, 'retry', step(1, 'charge'), 60_000), true);
    assert.equal(await c.store.release(k, 'retry'), true);
    const item = await only(p, 'half_done');
    assert.equal(item.reported ?? false, false);
    assert.deepEqual(stepNames(item), ['0:order', '1:charge']);
    assert.equal(await c.store.markAbandoned!(k, later), true);
  });

  listingQueryContract(c, kit);
}
