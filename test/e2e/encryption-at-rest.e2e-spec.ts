import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { IdempotencyModuleOptions, IdempotencyRecords } from '../../lib';
import { PLATFORMS, post, startTestApp } from '../support/test-app';
import { realStore, STORE_NAMES, storeSuite } from '../support/wrapped-store';

let seq = 0;
const newKey = () => `enc-${Date.now()}-${++seq}`;

/** A card number that must never sit in the store in plaintext once encryption is on. */
const SECRET = 'card-4242424242424242';
const OLD_KEY = randomBytes(32);
const NEW_KEY = 'a secret string of at least thirty-two characters';

describe.each(PLATFORMS)('encryption at rest on %s', (platform) => {
  describe.each(STORE_NAMES)('with the %s store', (storeName) => {
    const suite = storeSuite(storeName);
    const start = async (options: IdempotencyModuleOptions) => {
      const app = await startTestApp(platform, {
        store: suite.real.store,
        keyPrefix: suite.real.keyPrefix,
        storeErrors: [402],
        ...options,
      });
      suite.track(app);
      return app;
    };

    if (storeName !== 'memory') {
      it('stores the body, headers and errors in plaintext without it, and sealed with it', async () => {
        const plainStore = suite.real;
        const plain = await start({});
        expect(
          (await post(plain.url, '/payments', { key: newKey(), body: { SECRET } })).status,
        ).toBe(201);
        const declined = await post(plain.url, '/payments/fail', { key: newKey() });
        expect(declined.status).toBe(402);
        const stored = await suite.real.rawBytes();
        // Without encryption: the body, a replayed header and the stored error, as sent.
        expect(stored.includes(SECRET)).toBe(true);
        expect(stored.includes('/payments/42')).toBe(true);
        expect(stored.includes('card declined')).toBe(true);
        await plain.close();
        await plainStore.close();

        suite.real = await realStore(storeName); // an empty one: every byte in it is a sealed record's
        const sealed = await start({ encryption: { keys: [NEW_KEY] } });
        const key = newKey();
        const first = await post(sealed.url, '/payments', { key, body: { SECRET } });
        expect(first.status).toBe(201);
        expect((await post(sealed.url, '/payments/fail', { key: newKey() })).status).toBe(402);
        const added = await suite.real.rawBytes();
        expect(added.length).toBeGreaterThan(0);
        expect(added.includes(SECRET)).toBe(false);
        expect(added.includes('/payments/42')).toBe(false);
        expect(added.includes('card declined')).toBe(false);
        expect(added.includes('héllo')).toBe(false);

        // And it replays as it was sent, header included, without running the handler again.
        const replay = await post(sealed.url, '/payments', { key, body: { SECRET } });
        expect(replay.status).toBe(201);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.headers.get('location')).toBe('/payments/42');
        expect(replay.bytes.equals(first.bytes)).toBe(true);
        expect(sealed.executions.count('create')).toBe(1);
      });
    }

    it('replays sealed responses, stored errors and compressed bodies', async () => {
      const t = await start({ encryption: { keys: [NEW_KEY] } });
      const key = newKey();
      const first = await post(t.url, '/payments', { key, body: { SECRET } });
      const again = await post(t.url, '/payments', { key, body: { SECRET } });
      expect(again.status).toBe(201);
      expect(again.bytes.equals(first.bytes)).toBe(true);

      const errorKey = newKey();
      const declined = await post(t.url, '/payments/fail', { key: errorKey });
      const replayedError = await post(t.url, '/payments/fail', { key: errorKey });
      expect(replayedError.status).toBe(402);
      expect(replayedError.json()).toEqual(declined.json());

      const reportKey = newKey(); // about 100 KB: compressed, then sealed
      const report = await post(t.url, '/payments/report', { key: reportKey });
      const replayedReport = await post(t.url, '/payments/report', { key: reportKey });
      expect(replayedReport.bytes.equals(report.bytes)).toBe(true);
      expect(t.executions.count('create')).toBe(1);
      expect(t.executions.count('fail')).toBe(1);
      expect(t.executions.count('report')).toBe(1);
    });

    it('rotates: a prepended key seals new records, the previous one still opens old ones', async () => {
      const old = await start({ encryption: { keys: [OLD_KEY] } });
      const oldKey = newKey();
      const oldFirst = await post(old.url, '/payments', { key: oldKey, body: { n: 1 } });
      await old.close();

      const rotated = await start({ encryption: { keys: [NEW_KEY, OLD_KEY] } });
      const replay = await post(rotated.url, '/payments', { key: oldKey, body: { n: 1 } });
      expect(replay.status).toBe(201);
      expect(replay.bytes.equals(oldFirst.bytes)).toBe(true);
      const newRecord = newKey();
      const newFirst = await post(rotated.url, '/payments', { key: newRecord, body: { n: 2 } });
      expect(rotated.executions.count('create')).toBe(1);
      await rotated.close();

      // The old key dropped: new records still open; records it sealed no longer do.
      const current = await start({ encryption: { keys: [NEW_KEY] } });
      const fresh = await post(current.url, '/payments', { key: newRecord, body: { n: 2 } });
      expect(fresh.bytes.equals(newFirst.bytes)).toBe(true);
      const stale = await post(current.url, '/payments', { key: oldKey, body: { n: 1 } });
      expect(stale.status).toBe(500);
      expect(stale.json()).toMatchObject({ code: 'IDEMPOTENCY_RECORD_UNREADABLE' });
      expect(current.executions.count('create')).toBe(0);
    });

    it('answers 500 IDEMPOTENCY_RECORD_UNREADABLE to a record no key opens, logged once per route', async () => {
      const sealed = await start({ encryption: { keys: [OLD_KEY] } });
      const key = newKey();
      expect((await post(sealed.url, '/payments', { key, body: { SECRET } })).status).toBe(201);
      const records = sealed.app.get(IdempotencyRecords);
      // Operators still see the record's state with the keys out of reach.
      await expect(records.inspect({ key, route: 'POST /payments' })).resolves.toMatchObject({
        state: 'completed',
        status: 201,
        error: false,
      });
      const plainKey = newKey();
      await sealed.close();

      const warn = jest.spyOn(Logger.prototype, 'warn');
      try {
        const wrong = await start({ encryption: { keys: [randomBytes(32)] } });
        for (let i = 0; i < 2; i++) {
          const answer = await post(wrong.url, '/payments', { key, body: { SECRET } });
          expect(answer.status).toBe(500);
          expect(answer.json()).toMatchObject({
            statusCode: 500,
            code: 'IDEMPOTENCY_RECORD_UNREADABLE',
          });
          expect(answer.text).not.toContain(SECRET);
        }
        expect(wrong.executions.count('create')).toBe(0); // fail closed: nothing ran
        const logged = warn.mock.calls.filter(([message]) =>
          String(message).includes('cannot be read'),
        );
        expect(logged).toHaveLength(1);

        // A plaintext record where encryption is on is refused alike, and so is a sealed one
        // where it is off.
        const plain = await start({});
        expect((await post(plain.url, '/payments', { key: plainKey, body: {} })).status).toBe(201);
        const unsealed = await post(plain.url, '/payments', { key, body: { SECRET } });
        expect(unsealed.status).toBe(500);
        expect(unsealed.json()).toMatchObject({ code: 'IDEMPOTENCY_RECORD_UNREADABLE' });
        const planted = await post(wrong.url, '/payments', { key: plainKey, body: {} });
        expect(planted.status).toBe(500);
        expect(wrong.executions.count('create')).toBe(0);
      } finally {
        warn.mockRestore();
      }
    });
  });
});
