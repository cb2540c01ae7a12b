import { withTimeout } from '../utils/timeout';
import type { IdempotencyStore } from './idempotency.store';

/*
 * The optional hooks of IdempotencyStore with their defaults applied, for the module and the
 * Terminus indicator: a store passed in may predate the hooks, or be a plain object with the four
 * record methods only. A hook that throws (even synchronously) gets its default.
 */

/** What log lines call the store's backend: its `displayName`, else its class name. */
export function storeName(store: IdempotencyStore): string {
  return store.displayName ?? store.constructor?.name ?? 'the idempotency store';
}

/** Whether the store is ready within `timeoutMs` (ms): true for a store without the hook. */
export async function storeReady(store: IdempotencyStore, timeoutMs: number): Promise<boolean> {
  if (typeof store.whenReady !== 'function') return true;
  try {
    return (await store.whenReady(timeoutMs)) === true;
  } catch {
    return false;
  }
}

/** The store's boot warnings, given within `timeoutMs` (ms); none when it fails or is late. */
export async function storeBootWarnings(
  store: IdempotencyStore,
  timeoutMs: number,
): Promise<string[]> {
  if (typeof store.bootWarnings !== 'function') return [];
  const warnings = await withTimeout(
    (async () => store.bootWarnings!())(),
    timeoutMs,
    () => new Error('timeout'),
  ).catch(() => undefined);
  return Array.isArray(warnings) ? warnings.filter((warning) => typeof warning === 'string') : [];
}

/** The store's health details; undefined when it has none or fails to give them. */
export async function storeHealthDetails(
  store: IdempotencyStore,
): Promise<Record<string, unknown> | undefined> {
  if (typeof store.healthDetails !== 'function') return undefined;
  try {
    const details = await store.healthDetails();
    return typeof details === 'object' && details !== null ? details : undefined;
  } catch {
    return undefined;
  }
}
