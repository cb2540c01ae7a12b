import type { TransactionalOption } from './transactions';

/**
 * Why a store cannot serve resumable runs (`resumable`; with `transactional`, one transaction per
 * step), or undefined when it can.
 */
export function stepStoreProblem(
  store: object,
  transactional: boolean | TransactionalOption,
): string | undefined {
  const has = (method: string) => typeof (store as Record<string, unknown>)[method] === 'function';
  const name = store.constructor.name;
  if (!has('recordStep')) {
    return `\`resumable\` needs a store that records steps (recordStep): ${name} cannot`;
  }
  if (transactional && !has('recordStepInTransaction')) {
    return (
      "`resumable` with `transactional` records each step in the app's transaction " +
      `(recordStepInTransaction): ${name} cannot`
    );
  }
  return undefined;
}

/**
 * Fails at boot when a `resumable` route (`name`, with its `transactional`) needs what the store
 * cannot do: such a route would fail at its first step, on every request.
 */
export function assertResumableReady(
  routes: { name: string; transactional: boolean | TransactionalOption }[],
  store: object,
): void {
  for (const { name, transactional } of routes) {
    const problem = stepStoreProblem(store, transactional);
    if (problem) throw new Error(`IdempotencyModule: ${name} is resumable, and ${problem}`);
  }
}
