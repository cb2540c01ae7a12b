import { randomUUID } from 'node:crypto';
import { post, type TestApp } from './test-app';

/**
 * `onConflict: 'wait'` on `t`'s `/payments/wait`: three duplicates sent while the first request
 * runs are held until it completes, then each gets its response replayed, byte for byte; the
 * handler ran once and nobody got a 409. The same promise on every store.
 */
export async function expectDuplicatesHeldThenReplayed(t: TestApp): Promise<void> {
  const key = randomUUID();
  const started = t.executions.nextStarted();
  const first = post(t.url, '/payments/wait', { key, body: { hold: true } });
  const release = await started;
  const waiting = t.executions.waitFor('waiting', 3);
  const duplicates = [1, 2, 3].map(() =>
    post(t.url, '/payments/wait', { key, body: { hold: true } }),
  );
  await waiting;
  release();
  const [original, ...replays] = await Promise.all([first, ...duplicates]);
  expect(original.status).toBe(201);
  for (const replay of replays) {
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.bytes.equals(original.bytes)).toBe(true);
  }
  expect(t.executions.count('wait')).toBe(1);
  expect(t.executions.ofType('conflict')).toHaveLength(0);
}
