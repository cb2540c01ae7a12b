import { IdempotencyModuleOptions } from '../../lib';
import { deferred, PLATFORMS, post, startTestApp } from '../support/test-app';
import { STORE_NAMES, storeSuite, WrappedStore } from '../support/wrapped-store';

let seq = 0;
const newKey = () => `lease-${Date.now()}-${++seq}`;

describe.each(PLATFORMS)('the lease on %s', (platform) => {
  describe.each(STORE_NAMES)('with the %s store', (storeName) => {
    const suite = storeSuite(storeName);
    let store: WrappedStore;
    const start = async (options: IdempotencyModuleOptions = {}) => {
      const app = await startTestApp(platform, {
        store,
        keyPrefix: suite.real.keyPrefix,
        ...options,
      });
      suite.track(app);
      return app;
    };

    beforeEach(() => {
      store = new WrappedStore(suite.real.store);
    });

    it('is renewed until a slow completion write lands: a duplicate gets 409, the handler runs once', async () => {
      const t = await start({ lockTtl: 300 });
      const writing = deferred();
      const gate = deferred();
      let slowed = false;
      store.beforeComplete = async () => {
        if (slowed) return;
        slowed = true;
        writing.resolve();
        await gate.promise;
      };
      const key = newKey();
      const first = post(t.url, '/payments', { key, body: { amount: 1 } });
      await writing.promise;
      try {
        // Three renewals take a lockTtl; without renewals, three lockTtls pass instead.
        await store.renewals(3, 900);
        const duplicate = await post(t.url, '/payments', { key, body: { amount: 1 } });
        expect(duplicate.status).toBe(409);
      } finally {
        gate.resolve();
      }
      expect((await first).status).toBe(201);
      expect(t.executions.count('create')).toBe(1);
    });

    it('is renewed one call at a time: a slow renewal is never overlapped by the next', async () => {
      // Renewals every 300 ms that take 400 ms each: the next falls due while one is in flight.
      store.beforeExtend = () => new Promise((resolve) => setTimeout(resolve, 400));
      const t = await start({ lockTtl: 900 });
      const started = t.executions.nextStarted();
      const first = post(t.url, '/payments/slow', { key: newKey(), body: {} });
      const release = await started;
      try {
        await store.renewals(3, 5_000);
      } finally {
        release();
      }
      expect((await first).status).toBe(201);
      expect(store.extends).toBeGreaterThanOrEqual(3);
      expect(store.maxConcurrentExtends).toBe(1);
    });

    it('of a claim whose reply was lost is released, so that a retry runs at once', async () => {
      const t = await start(); // lockTtl 30 s: without the release, the retry would get 409
      const key = newKey();
      store.failClaimAfter = new Error('connection reset after the command was sent');
      const released = t.executions.waitFor('released', 1, 3_000);
      const lost = await post(t.url, '/payments', { key, body: { amount: 1 } });
      expect(lost.status).toBe(503);
      store.failClaimAfter = undefined;
      await released;
      const retry = await post(t.url, '/payments', { key, body: { amount: 1 } });
      expect(retry.status).toBe(201);
      expect(t.executions.count('create')).toBe(1);
    });

    it('of another request is not released when a claim on its key rejects', async () => {
      const t = await start();
      const key = newKey();
      const started = t.executions.nextStarted();
      const first = post(t.url, '/payments/slow', { key, body: {} });
      const release = await started;
      try {
        store.failClaimAfter = new Error('connection reset after the command was sent');
        expect((await post(t.url, '/payments/slow', { key, body: {} })).status).toBe(503);
        store.failClaimAfter = undefined;
        expect((await post(t.url, '/payments/slow', { key, body: {} })).status).toBe(409);
      } finally {
        release();
      }
      expect((await first).status).toBe(201);
      expect(t.executions.count('slow')).toBe(1);
    });
  });
});
