import type { Cluster, Redis } from 'ioredis';
import { once } from 'node:events';
import { withTimeout } from '../../utils/timeout';

/**
 * Resolves true once `client` is ready, or at once when it waits for its first command (a client
 * of yours with `lazyConnect`: nothing to wait for); false after `timeoutMs`.
 */
export function clientReady(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready' || client.status === 'wait') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}

/** How long a shutdown waits for Redis to acknowledge QUIT before dropping the connection, in ms. */
const QUIT_TIMEOUT_MS = 2_000;

/**
 * Closes a connection, resolving once it is really gone (not when QUIT is acknowledged), or after
 * {@link QUIT_TIMEOUT_MS} when Redis does not answer (stalled, partitioned): a shutdown must end.
 */
export async function disconnect(client: Redis | Cluster): Promise<void> {
  if (client.status !== 'ready') {
    // Connecting, reconnecting or never connected: nothing to flush, just stop trying.
    client.disconnect();
    return;
  }
  // An error while closing ends the wait as well (once() rejects on 'error'): never unhandled.
  const ended = once(client, 'end').catch(() => undefined);
  const quit = client.quit().then(
    () => ended,
    () => client.disconnect(),
  );
  await withTimeout(quit, QUIT_TIMEOUT_MS, () => new Error('QUIT timed out')).catch(() =>
    client.disconnect(),
  );
}
