import { randomUUID } from 'node:crypto';
import { IdempotencyRecords } from '../../lib';
import type { OpenDatabase } from '../support/transactional/databases';
import { ENTRY_POINTS } from '../support/transactional/entry-points';
import {
  DECLINES_ONCE,
  type Answer,
  Ledger,
  type RunningEntry,
  transactionalImports,
} from '../support/transactional/harness';
import { ORMS, type OpenOrm } from '../support/transactional/orms';

// `transactional: true` keeps one promise on every entry point through every
// @nestjs-cls/transactional adapter: the handler's row and the idempotency record commit in one
// transaction (a replay follows, the row exists once), a throw after the write rolls both back
// (the key freed, a retry runs again), and a handler whose key was taken over (fenced) never
// commits its row. Rows: the entry points of entry-points.ts; columns: the adapters of orms.ts.

describe.each(ORMS)('transactional completion through $name on $database.name', (orm) => {
  let database: OpenDatabase;
  let opened: OpenOrm;

  beforeAll(async () => {
    database = await orm.database.connect();
    opened = await orm.open(orm.database.url(), database.payments);
  });
  afterAll(async () => {
    await opened?.close();
    await database?.close();
  });

  describe.each(ENTRY_POINTS)('on a $name', (entry) => {
    let ledger: Ledger;
    let running: RunningEntry;

    beforeAll(async () => {
      ledger = new Ledger(opened);
      running = await entry.start(
        (interceptor) =>
          transactionalImports(
            { provide: 'ORM_INSTANCE', useValue: opened.instance },
            opened.adapter,
            {
              ...database.store,
              scope: 'public',
              onEvent: (event) => ledger.record(event),
            },
            { interceptor },
          ),
        ledger,
      );
    });
    afterAll(() => running?.close());

    /** The record of `key` as the store has it, on the route the last event named. */
    const recordState = async (key: string) =>
      (
        await running.app
          .get(IdempotencyRecords)
          .inspect({ key, route: ledger.events.at(-1)!.route })
      ).state;

    it('commits the row and the record together; a retry replays it', async () => {
      const key = randomUUID();
      const item = `pays-${key}`;
      const mark = ledger.events.length;
      const first = await call(key, item);
      expect(failure(first)).toBeUndefined();
      if (database.writers) {
        const [payment, record] = await database.writers(item, ledger.last('completed').key!);
        expect(payment).toBeDefined();
        expect(record).toBe(payment);
      }
      const retry = await call(key, item);
      expect(retry).toEqual({
        ...first,
        replayed: first.replayed === undefined ? undefined : true,
      });
      expect(ledger.typesSince(mark)).toEqual(['claimed', 'completed', 'replayed']);
      expect(await database.rows(item)).toBe(1);
    });

    it('rolls the row back when the handler throws after writing; a retry runs once', async () => {
      const key = randomUUID();
      const item = `${DECLINES_ONCE}-${key}`;
      const mark = ledger.events.length;
      const failed = await call(key, item);
      expect(failed).toMatchObject({ ok: false, text: entry.declined });
      expect(await database.rows(item)).toBe(0);
      expect(ledger.typesSince(mark)).toEqual(['claimed', 'released']);
      expect(await recordState(key)).toBe('absent');
      const retry = await call(key, item);
      expect(failure(retry)).toBeUndefined();
      expect(await database.rows(item)).toBe(1);
      expect((await call(key, item)).text).toBe(retry.text);
      expect(await database.rows(item)).toBe(1);
      expect(ledger.typesSince(mark)).toEqual([
        'claimed',
        'released',
        'claimed',
        'completed',
        'replayed',
      ]);
    });

    it('rolls a fenced handler’s row back; only the call that took the key over commits', async () => {
      const key = randomUUID();
      const item = `fenced-${key}`;
      const held = ledger.hold(item);
      const zombie = call(key, item);
      let heir: Answer;
      try {
        await held.started;
        // Its lease is gone (as after a stall past lockTtl, or an operator's delete): another
        // call takes the key over.
        const { route } = ledger.last('claimed');
        expect(await running.app.get(IdempotencyRecords).delete({ key, route })).toBe(true);
        heir = await call(key, item);
        expect(failure(heir)).toBeUndefined();
      } finally {
        // Whatever happened: a held handler keeps its connection, and closing the ORM waits for it.
        held.release();
      }
      expect(await zombie).toMatchObject({ ok: false, text: entry.fenced });
      expect(await database.rows(item)).toBe(1);
      expect((await call(key, item)).text).toBe(heir.text);
      expect(ledger.events.filter((event) => event.type === 'fenced')).not.toHaveLength(0);
    });

    const call = (key: string, item: string) => running.call(key, item);
    /** What went wrong, as the caller was told: undefined for a success. */
    const failure = (answer: Answer) => (answer.ok ? undefined : answer.text);
  });
});
