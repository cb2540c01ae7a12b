import {
  BadRequestException,
  NotImplementedException,
  ServiceUnavailableException,
} from '@nestjs/common';
import { RecordLabels } from '../../lib/core/record-label';
import { recordKey, recordScope } from '../../lib/core/record-key';
import { resolveModuleOptions } from '../../lib/options';
import { IdempotencyRecords } from '../../lib/services/idempotency-records.service';
import type { IdempotencyRecordListQuery } from '../../lib/services/record-list';
import { MemoryIdempotencyStore } from '../../lib/stores/memory/memory-idempotency.store';
import type {
  ListedRecord,
  ListRecordsPage,
  ListRecordsQuery,
  RecordCounts,
} from '../../lib/stores/record-listing';
import { RecordCipher } from '../../lib/utils/encryption';
import { encodeResponse, packResponse } from '../../lib/utils/response-codec';

const ROUTE = 'POST /payments';
const SECRET = 'Zk3vQ9rT1xLw8pNc2yHs6bJd4mFa7gEu';

/** A store that lists what the test gives it, and keeps the queries it was asked. */
class ListingStore extends MemoryIdempotencyStore {
  readonly asked: ListRecordsQuery[] = [];
  pages: ListRecordsPage[] = [];

  constructor() {
    super({ sweepIntervalMs: 0 });
  }

  override async list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    this.asked.push(query);
    return this.pages.shift() ?? { items: [] };
  }

  override async countRecords(): Promise<RecordCounts> {
    return { running: 1, stuck: 2, half_done: 3, completed: 4 };
  }
}

/** A listed record of `key` on ROUTE for principal 42, labelled as the claim core labels it. */
function listed(labels: RecordLabels, key: string, extra: Partial<ListedRecord>): ListedRecord {
  const scope = recordScope(ROUTE, undefined, 'id=s:42');
  const ref = recordKey('idempotency:', scope, key);
  const about = labels.about({ key: ref, route: ROUTE, scope, clientKey: key });
  return { key: ref, state: 'half_done', since: Date.now() - 1_000, about, ...extra };
}

describe('IdempotencyRecords.list', () => {
  let store: ListingStore;
  let records: IdempotencyRecords;
  const labels = new RecordLabels(new RecordCipher({ keys: [SECRET] }));

  beforeEach(() => {
    store = new ListingStore();
    const options = resolveModuleOptions({ encryption: { keys: [SECRET] }, maxLockHold: '10m' });
    records = new IdempotencyRecords(store, options);
  });

  it('asks the store with the defaults, and stuck after maxLockHold', async () => {
    await records.list({ state: 'running' });
    expect(store.asked).toEqual([
      {
        state: 'running',
        prefix: 'idempotency:',
        order: 'newest',
        limit: 50,
        stuckAfterMs: 600_000,
      },
    ]);
  });

  it('passes the filters on, durations in ms', async () => {
    await records.list({
      state: 'half_done',
      route: ROUTE,
      olderThan: '15m',
      newerThan: 86_400_000,
      order: 'oldest',
      limit: 500,
      keyPrefix: 'other:',
    });
    expect(store.asked[0]).toMatchObject({
      prefix: 'other:',
      route: ROUTE,
      minAgeMs: 900_000,
      maxAgeMs: 86_400_000,
      order: 'oldest',
      limit: 500,
    });
  });

  it('opens each label: the key as sent, the owner, the steps in order', async () => {
    store.pages = [
      {
        items: [
          listed(labels, 'order-7', {
            steps: [
              { index: 1, name: 'charge' },
              { index: 0, name: 'order' },
            ],
            reported: false,
          }),
        ],
      },
    ];
    const { items, cursor } = await records.list({ state: 'half_done' });
    expect(cursor).toBeUndefined();
    expect(items).toEqual([
      {
        ref: expect.stringMatching(/^idempotency:\{/),
        key: 'order-7',
        route: ROUTE,
        user: { id: '42' },
        keyPrefix: 'idempotency:',
        state: 'half_done',
        ageMs: expect.any(Number),
        steps: [
          { index: 0, name: 'order' },
          { index: 1, name: 'charge' },
        ],
        reported: false,
      },
    ]);
    expect(items[0].ageMs).toBeGreaterThanOrEqual(1_000);
  });

  it('lists a record whose label does not open without its key and owner, and the rest whole', async () => {
    const otherKey = new RecordLabels(new RecordCipher({ keys: ['another-secret-'.repeat(4)] }));
    const stranger = listed(otherKey, 'k-stranger', {});
    const garbage = { ...listed(labels, 'k-garbage', {}), about: { route: ROUTE, label: 'sxx' } };
    const old = { ...listed(labels, 'k-old', {}), about: undefined };
    store.pages = [{ items: [stranger, garbage, old, listed(labels, 'k-fine', {})] }];
    const { items } = await records.list({ state: 'half_done' });
    expect(items.map((item) => [item.key, item.user, item.route])).toEqual([
      [undefined, undefined, ROUTE],
      [undefined, undefined, ROUTE],
      [undefined, undefined, undefined],
      ['k-fine', { id: '42' }, ROUTE],
    ]);
  });

  it('reads a completed record: its status and whether it is an error, sealed or not', async () => {
    const ref = recordKey('idempotency:', ROUTE, 'k-done');
    const cipher = new RecordCipher({ keys: [SECRET] });
    const encoded = encodeResponse({ status: 402, headers: {}, value: { paid: false } });
    const stored = await packResponse(encoded, false, { cipher, context: ref });
    store.pages = [
      {
        items: [
          { key: ref, state: 'completed', since: Date.now(), meta: stored.meta },
          { key: ref, state: 'completed', since: Date.now(), meta: 'not json' },
        ],
      },
    ];
    const { items } = await records.list({ state: 'completed' });
    expect(items[0]).toMatchObject({ state: 'completed', status: 402, error: false });
    expect(items[1]).not.toHaveProperty('status');
  });

  it("hands out the store's cursor wrapped, and takes it back for the same query only", async () => {
    store.pages = [{ items: [], cursor: 'store-cursor-1' }];
    const first = await records.list({ state: 'stuck', route: ROUTE });
    expect(first.cursor).toEqual(expect.any(String));
    expect(first.cursor).not.toBe('store-cursor-1');
    await records.list({ state: 'stuck', route: ROUTE, cursor: first.cursor });
    expect(store.asked[1].cursor).toBe('store-cursor-1');
    for (const other of [
      { state: 'running', route: ROUTE },
      { state: 'stuck' },
      { state: 'stuck', route: ROUTE, order: 'oldest' },
    ] as IdempotencyRecordListQuery[]) {
      await expect(records.list({ ...other, cursor: first.cursor })).rejects.toBeInstanceOf(
        BadRequestException,
      );
    }
  });

  it.each([
    ['a state that is not one of the four', { state: 'pending' }],
    ['no state', {}],
    ['a limit of 0', { state: 'running', limit: 0 }],
    ['a limit over 500', { state: 'running', limit: 501 }],
    ['a limit that is not whole', { state: 'running', limit: 2.5 }],
    ['a limit as text', { state: 'running', limit: '50' }],
    ['a duration that is not one', { state: 'running', olderThan: 'soon' }],
    ['a negative age', { state: 'running', newerThan: -1 }],
    ['olderThan past newerThan', { state: 'running', olderThan: '2h', newerThan: '1h' }],
    ['an order that is not one', { state: 'running', order: 'random' }],
    ['an empty route', { state: 'running', route: '' }],
    ['a cursor that is not one', { state: 'running', cursor: 'garbage' }],
    ['a misspelt field', { state: 'running', olderthan: '1m' }],
  ])('answers 400 for %s, and asks the store nothing', async (_name, query) => {
    await expect(records.list(query as never)).rejects.toBeInstanceOf(BadRequestException);
    expect(store.asked).toEqual([]);
  });

  it('answers 503 when the store does not answer within storeTimeout', async () => {
    const slow = new ListingStore();
    slow.list = () => new Promise(() => {});
    slow.countRecords = () => new Promise(() => {});
    const bounded = new IdempotencyRecords(slow, resolveModuleOptions({ storeTimeout: 20 }));
    await expect(bounded.list({ state: 'running' })).rejects.toBeInstanceOf(
      ServiceUnavailableException,
    );
    await expect(bounded.counts()).rejects.toBeInstanceOf(ServiceUnavailableException);
  });

  it('says the store cannot list when it has no list()', async () => {
    const unlisting = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    // A store written before listing existed (the memory store lists, once it can).
    Object.defineProperty(unlisting, 'list', { value: undefined });
    const plain = new IdempotencyRecords(unlisting, resolveModuleOptions({}));
    await expect(plain.list({ state: 'running' })).rejects.toThrow(
      new NotImplementedException(
        'IdempotencyRecords: the store (MemoryIdempotencyStore) cannot list records: it has no ' +
          'list() and countRecords() (see docs/stores.md)',
      ),
    );
    await expect(plain.counts()).rejects.toBeInstanceOf(NotImplementedException);
  });

  it('counts every state', async () => {
    expect(await records.counts()).toEqual({ running: 1, stuck: 2, half_done: 3, completed: 4 });
  });
});

describe('IdempotencyRecords.inspect and delete, by a listed item', () => {
  it('find the record by its ref', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const records = new IdempotencyRecords(store, resolveModuleOptions({}));
    const ref = recordKey('idempotency:', recordScope(ROUTE, 's:acme', undefined), 'k-1');
    await store.claim(ref, { token: 't', fingerprint: '', leaseMs: 60_000 });
    const item = { ref, keyPrefix: 'idempotency:', route: ROUTE };
    expect(await records.inspect(item)).toMatchObject({ state: 'pending' });
    expect(await records.inspect({ key: 'k-1', route: ROUTE, tenant: 'acme' })).toMatchObject({
      state: 'pending',
    });
    expect(await records.delete(item)).toBe(true);
    expect(await records.inspect(item)).toEqual({ state: 'absent' });
  });

  it('refuse a ref that is not a record key under its prefix, touching nothing', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const remove = jest.spyOn(store, 'delete');
    const records = new IdempotencyRecords(store, resolveModuleOptions({}));
    const ref = recordKey('idempotency:', ROUTE, 'k-1');
    for (const bad of [
      { ref: 'session:abc' },
      { ref: 'idempotency:abc' },
      { ref: `${ref}x` },
      { ref, keyPrefix: 'other:' },
      { ref: 42 },
    ]) {
      await expect(records.delete(bad as never)).rejects.toBeInstanceOf(BadRequestException);
    }
    expect(remove).not.toHaveBeenCalled();
  });
});
