import type { Logger } from '@nestjs/common';
import { RecordLabels } from '../../lib/core/record-label';
import { recordKey, recordScope } from '../../lib/core/record-key';
import type { IdempotencyEvent } from '../../lib/interfaces/idempotency-event.interface';
import { resolveModuleOptions } from '../../lib/options';
import { AbandonedRunReporter, abandonedLine } from '../../lib/services/abandoned-reporter';
import { IdempotencyRecords } from '../../lib/services/idempotency-records.service';
import { MemoryIdempotencyStore } from '../../lib/stores/memory/memory-idempotency.store';
import type {
  ListedRecord,
  ListRecordsPage,
  ListRecordsQuery,
  RecordCounts,
} from '../../lib/stores/record-listing';

const ROUTE = 'POST /orders';
const AFTER = 300;

/**
 * Half-done runs held in memory, listed and marked as the store contract says (markAbandoned
 * atomic: one caller wins): the stand-in for a shared store, under several reporters.
 */
class HalfDoneStore extends MemoryIdempotencyStore {
  readonly runs: (ListedRecord & { reported: boolean })[] = [];
  lists = 0;
  /**
   * Lists every run as not reported yet, as lists made at the same moment in several processes
   * see it: only markAbandoned then keeps the report to one.
   */
  simultaneous = false;
  private readonly labels = new RecordLabels();

  constructor() {
    super({ sweepIntervalMs: 0 });
  }

  add(key: string, endedMsAgo: number, reported = false): string {
    const scope = recordScope(ROUTE, undefined, 'id=s:ann');
    const ref = recordKey('idempotency:', scope, key);
    const about = this.labels.about({ key: ref, route: ROUTE, scope, clientKey: key });
    const steps = [
      { index: 0, name: 'order' },
      { index: 1, name: 'charge' },
    ];
    const since = Date.now() - endedMsAgo;
    this.runs.push({ key: ref, state: 'half_done', since, about, steps, reported });
    return ref;
  }

  override async list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    this.lists++;
    const now = Date.now();
    const start = Number(query.cursor ?? 0);
    const found = this.runs
      .filter((run) => now - run.since >= (query.minAgeMs ?? 0))
      .filter((run) => now - run.since <= (query.maxAgeMs ?? Infinity))
      .sort((a, b) => a.since - b.since);
    const items = found
      .slice(start, start + query.limit)
      .map((run) => ({ ...run, reported: run.reported && !this.simultaneous }));
    const next = start + query.limit;
    return next < found.length ? { items, cursor: String(next) } : { items };
  }

  override async countRecords(): Promise<RecordCounts> {
    return { running: 0, stuck: 0, half_done: this.runs.length, completed: 0 };
  }

  override async markAbandoned(key: string, endedBefore: number): Promise<boolean> {
    const run = this.runs.find((candidate) => candidate.key === key);
    if (!run || run.reported || run.since > endedBefore) return false;
    run.reported = true;
    return true;
  }
}

const quietLogger = () =>
  ({ log: jest.fn(), warn: jest.fn(), error: jest.fn() }) as unknown as Logger & {
    warn: jest.Mock;
    log: jest.Mock;
  };

describe('AbandonedRunReporter', () => {
  const running: AbandonedRunReporter[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((reporter) => reporter.stop()));
  });

  /** A reporter as one app process starts it, with its own events and log. */
  function process(store: HalfDoneStore, abandonedAfter: number | false = AFTER) {
    const events: IdempotencyEvent[] = [];
    const options = resolveModuleOptions({
      abandonedAfter,
      metrics: false,
      onEvent: (event) => events.push(event),
    });
    const logger = quietLogger();
    const records = new IdempotencyRecords(store, options);
    const reporter = AbandonedRunReporter.start(records, store, options, logger);
    if (reporter) running.push(reporter);
    return { events, logger, reporter };
  }

  /** Resolves once the store was listed `count` more times (every reporter looked again). */
  async function looks(store: HalfDoneStore, count: number): Promise<void> {
    const target = store.lists + count;
    while (store.lists < target) await new Promise((resolve) => setTimeout(resolve, 20));
  }

  it('reports a half-done run once across three processes: one event, one log line', async () => {
    const store = new HalfDoneStore();
    const ref = store.add('order-1', 2 * AFTER);
    store.simultaneous = true;
    const processes = [process(store), process(store), process(store)];
    await looks(store, 3 * 3);
    const events = processes.flatMap((p) => p.events);
    expect(events).toEqual([
      {
        type: 'abandoned',
        handler: ROUTE,
        route: ROUTE,
        key: ref,
        error: undefined,
        record: expect.objectContaining({
          ref,
          key: 'order-1',
          route: ROUTE,
          user: { id: 'ann' },
          state: 'half_done',
          steps: [
            { index: 0, name: 'order' },
            { index: 1, name: 'charge' },
          ],
          reported: true,
        }),
      },
    ]);
    const lines = processes.flatMap((p) => p.logger.warn.mock.calls.map(([line]) => line));
    expect(lines).toEqual([
      expect.stringMatching(
        /^abandoned: POST \/orders, key "order-1", user "ann", steps done: order, charge; half done for/,
      ),
    ]);
  });

  it('waits abandonedAfter from the end of the last claim, and skips runs reported already', async () => {
    const store = new HalfDoneStore();
    store.add('reported-before', 10 * AFTER, true);
    store.add('fresh', 0);
    const { events } = process(store);
    await looks(store, 1);
    expect(events).toEqual([]);
    while (events.length === 0) await looks(store, 1);
    expect(events.map((event) => event.record?.key)).toEqual(['fresh']);
  });

  it('stops at shutdown: no look after stop()', async () => {
    const store = new HalfDoneStore();
    const { reporter } = process(store);
    await looks(store, 1);
    await reporter!.stop();
    const after = store.lists;
    await new Promise((resolve) => setTimeout(resolve, 2 * AFTER));
    expect(store.lists).toBe(after);
  });

  it('does not start without a store that lists, nor when off and without metrics', () => {
    const plain = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    Object.defineProperty(plain, 'list', { value: undefined });
    const logger = quietLogger();
    const options = resolveModuleOptions({ metrics: false });
    const records = new IdempotencyRecords(plain, options);
    expect(AbandonedRunReporter.start(records, plain, options, logger)).toBeUndefined();
    expect(logger.log).toHaveBeenCalledWith(
      'MemoryIdempotencyStore does not list records: half-done runs are not reported abandoned',
    );
    expect(process(new HalfDoneStore(), false).reporter).toBeUndefined();
  });

  it('warns at boot when abandonedAfter is not below ttl', () => {
    const store = new HalfDoneStore();
    const logger = quietLogger();
    const options = resolveModuleOptions({ metrics: false, abandonedAfter: '2d' });
    const reporter = AbandonedRunReporter.start(
      new IdempotencyRecords(store, options),
      store,
      options,
      logger,
    );
    running.push(reporter!);
    expect(logger.warn).toHaveBeenCalledWith(expect.stringMatching(/is not below ttl/));
  });

  it('writes the key and owner of a line as JSON: no line breaks from a client', () => {
    const line = abandonedLine({
      ref: 'idempotency:{x}',
      key: 'k\nFAKE LOG LINE',
      route: 'run:orders',
      tenant: 'acme',
      keyPrefix: 'idempotency:',
      state: 'half_done',
      ageMs: 960_000,
    });
    expect(line).not.toContain('\n');
    expect(line).toContain('key "k\\nFAKE LOG LINE", tenant "acme", steps done: none');
    expect(line).toContain('half done for 16 min');
  });
});
