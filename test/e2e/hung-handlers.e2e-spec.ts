import { IdempotencyModuleOptions } from '../../lib';
import { PLATFORMS, post, startTestApp } from '../support/test-app';
import { STORE_NAMES, storeSuite } from '../support/wrapped-store';

let seq = 0;
const newKey = () => `hung-${Date.now()}-${++seq}`;

/** A retry waits for the holder's lease to run out rather than polling (onConflict: 'wait'). */
const WAITING: IdempotencyModuleOptions = { onConflict: 'wait', waitTimeout: 8_000 };

describe.each(PLATFORMS)('a hung handler on %s', (platform) => {
  describe.each(STORE_NAMES)('with the %s store', (storeName) => {
    const suite = storeSuite(storeName);
    const start = async (options: IdempotencyModuleOptions) => {
      const app = await startTestApp(platform, {
        store: suite.real.store,
        keyPrefix: suite.real.keyPrefix,
        ...options,
      });
      suite.track(app);
      return app;
    };

    it('holds its key no longer than maxLockHold: a retry then runs, and its late outcome is fenced', async () => {
      const t = await start({ lockTtl: 300, maxLockHold: 300, ...WAITING });
      const key = newKey();
      const started = t.executions.nextStarted();
      // The first run never settles until the test lets it (a handler stuck on a dead socket).
      const first = post(t.url, '/payments/slow', { key, body: {} });
      const release = await started;
      try {
        const since = performance.now();
        const retry = await post(t.url, '/payments/slow', { key, body: {} });
        const blockedMs = performance.now() - since;
        expect(retry.status).toBe(201);
        expect(retry.json()).toEqual({ run: 2 });
        // Past maxLockHold the lease runs out within lockTtl.
        expect(blockedMs).toBeLessThan(300 + 300 + 2_000);
      } finally {
        const fenced = t.executions.waitFor('fenced');
        release();
        await fenced; // the stuck run's completion is refused: the retry's outcome stays
      }
      expect((await first).json()).toEqual({ run: 1 });
      const replay = await post(t.url, '/payments/slow', { key, body: {} });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json()).toEqual({ run: 2 });
      expect(t.executions.count('slow')).toBe(2);
    });

    it('stops renewing at app.close(): another instance runs the retry once the lease runs out', async () => {
      const closing = await start({ lockTtl: 300 });
      const other = await start({ lockTtl: 300, ...WAITING });
      const key = newKey();
      const started = closing.executions.nextStarted();
      // Not kept alive, so that the closing server is left no idle connection to wait on.
      const headers = { connection: 'close' };
      const first = post(closing.url, '/payments/slow', { key, body: {}, headers });
      const release = await started;
      let closed: Promise<void> | undefined;
      try {
        // The server then waits for the hung request; the shutdown hooks have run by then.
        closed = closing.close();
        // The retry's run is the other instance's first, which /payments/slow holds: let it go.
        void other.executions.nextStarted().then((go) => go());
        const retry = await post(other.url, '/payments/slow', { key, body: {} });
        expect(retry.status).toBe(201);
        expect(other.executions.count('slow')).toBe(1);
      } finally {
        release();
        await first.catch(() => undefined);
        await closed;
      }
    });
  });
});
