import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import type { ClaimResult, StoredStep } from '../stores/idempotency.store';
import type {
  ListedRecord,
  ListedState,
  ListRecordsPage,
  ListRecordsQuery,
  RecordAbout,
} from '../stores/record-listing';
import { type ContractContext, response } from './store-contract-support';

/** How late a store's answer may come on a busy machine, in ms. */
export const SLACK = 2_000;

/**
 * Whether `since` reads as ms since the epoch (not seconds, not µs). Compared with the store's
 * own time only: a store on a fake clock lists its times from its own start.
 */
export function plausibleTime(since: number): boolean {
  return Number.isSafeInteger(since) && since > Date.UTC(2020, 0, 1) && since < 1e14;
}

/** What a claim of the listing cases carries, beside its key and token. */
export interface ListingClaim {
  about?: RecordAbout;
  leaseMs?: number;
  resumable?: boolean;
  fingerprint?: string;
}

/** The listing cases' helpers, over the suite's context: see {@link listingKit}. */
export type ListingKit = ReturnType<typeof listingKit>;

/**
 * What the listing cases share: a key prefix per case (so that its lists and counts see its
 * records only), claims that carry `about`, the lists of every state, records made half done or
 * stuck the honest way, and a way to let the store's time pass until it answers.
 */
export function listingKit(c: ContractContext) {
  const { timeout, lease } = c;
  /** A listing case: named `listing: ...`, so that `-t listing:` runs them alone. */
  const it = (name: string, fn: () => Promise<void>) => c.it(`listing: ${name}`, fn, timeout);
  const lists = () => typeof c.store.list === 'function';
  const steps = () => lists() && typeof c.store.recordStep === 'function';

  /** A key prefix no other case uses, under the suite's own. */
  const space = () => {
    const k = c.key();
    return `${k.slice(0, k.lastIndexOf('{'))}list-${randomUUID().slice(0, 8)}:`;
  };
  const keyIn = (prefix: string) => `${prefix}{${randomUUID()}}`;
  const about = (route: string, label = `key and owner of ${route}`): RecordAbout => ({
    route,
    label,
  });
  const claim = (k: string, token: string, o: ListingClaim = {}): Promise<ClaimResult> =>
    c.store.claim(k, {
      token,
      fingerprint: o.fingerprint ?? 'fp',
      leaseMs: o.leaseMs ?? 60_000,
      resumable: o.resumable,
      about: o.about,
    });
  const step = (index: number, name: string): StoredStep => ({
    index,
    name,
    result: response(name),
  });
  const list = (prefix: string, state: ListedState, q: Partial<ListRecordsQuery> = {}) =>
    c.store.list!({ prefix, state, limit: 100, ...q });
  const keysOf = (page: ListRecordsPage) => page.items.map((item) => item.key);
  const only = async (prefix: string, state: ListedState, q: Partial<ListRecordsQuery> = {}) => {
    const page = await list(prefix, state, q);
    assert.equal(page.items.length, 1, `${state}: ${JSON.stringify(page)}`);
    assert.equal(page.cursor, undefined, 'a single page has no cursor');
    return page.items[0];
  };
  /** Every state's list of `prefix`, as keys: for asserting where a record is listed. */
  const everywhere = async (prefix: string) => {
    const seen: Record<string, string[]> = {};
    for (const state of ['running', 'stuck', 'half_done', 'completed'] as const) {
      seen[state] = keysOf(await list(prefix, state));
    }
    return seen;
  };
  const nowhere = { running: [], stuck: [], half_done: [], completed: [] };
  const stepNames = (item: ListedRecord) =>
    [...(item.steps ?? [])].sort((a, b) => a.index - b.index).map((s) => `${s.index}:${s.name}`);

  /**
   * Lets time pass for the store until `done` answers true: a fake clock advances, a real one
   * waits. What is polled is the store's own answer, never a guess of how long it takes.
   */
  async function until(done: () => Promise<boolean>, what: string): Promise<void> {
    const tick = Math.max(10, Math.floor(lease / 6));
    for (let waited = 0; waited <= 20_000; waited += tick) {
      if (await done()) return;
      await c.advanceTime(tick);
    }
    assert.fail(`${what}: not within 20 s of the store's time`);
  }
  /** The store's time now, as lists read it: the `since` of a claim made now. */
  const storeTime = async () => {
    const p = space();
    await claim(keyIn(p), 'clock');
    return (await list(p, 'running')).items[0].since;
  };
  const listed = (prefix: string, state: ListedState, k: string) => async () =>
    keysOf(await list(prefix, state)).includes(k);
  const gone = (prefix: string, state: ListedState, k: string) => async () =>
    !keysOf(await list(prefix, state)).includes(k);

  /** A run that recorded `names` and was released: half done. */
  async function halfDone(prefix: string, names = ['order'], a = about('POST /orders')) {
    const k = keyIn(prefix);
    await claim(k, 'a', { about: a, resumable: true });
    for (const [index, name] of names.entries()) {
      assert.equal(await c.store.recordStep!(k, 'a', step(index, name), 60_000), true);
    }
    assert.equal(await c.store.release(k, 'a'), true);
    return k;
  }

  /** Claims with `lease` and waits until the lease ran out (its process died). */
  async function crashed(prefix: string, o: ListingClaim & { names?: string[] } = {}) {
    const k = keyIn(prefix);
    await claim(k, 'dead', { ...o, leaseMs: lease });
    for (const [index, name] of (o.names ?? []).entries()) {
      assert.equal(await c.store.recordStep!(k, 'dead', step(index, name), 60_000), true);
    }
    const state = o.names?.length ? 'half_done' : 'stuck';
    await until(listed(prefix, state, k), `the lease of ${k} to run out`);
    return k;
  }

  return {
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
    gone,
    halfDone,
    crashed,
  };
}
