import type { ClaimSteps } from '../core/steps';
import {
  currentClaim,
  type DerivationSettings,
  inClaimContext,
  someCoreDerives,
} from './claim-context';
import { propagateOutboundCalls } from './install';

/**
 * Runs `fn` (which runs, or subscribes, a claimed handler) in the claim's async context, so that
 * the handler and everything it starts can call `derivedIdempotencyKey()`, and, with
 * `propagateKeys`, its outbound calls carry derived keys. The interceptor calls it where it
 * subscribes a claimed handler; anything else that runs work under a claim (a job runner) calls
 * it the same way, around the work.
 *
 * @param recordKey the store key of the claimed record (prefix and hash; never the client's key)
 * @param settings the route's `propagateKeys` and the module's `keyDerivationSecret`
 */
export function runClaimed<T>(recordKey: string, settings: DerivationSettings, fn: () => T): T {
  return enterClaim(recordKey, settings, fn);
}

/**
 * {@link runClaimed}, as the claim core calls it: with the run's steps in the context when it is
 * resumable. The context is what derived keys, propagated keys and steps read, and nothing else,
 * so a run that can use none of them (no `keyDerivationSecret`, no `propagateKeys`, not
 * resumable, and no module of the process with a secret) runs without one: on Node 22 the first
 * AsyncLocalStorage context switches on promise hooks for the whole process, which cost a claimed
 * request about 45 µs and every other request some too (bench/als.js); Node 24 and later pay
 * next to nothing for it either way.
 */
export function enterClaim<T>(
  recordKey: string,
  settings: DerivationSettings,
  fn: () => T,
  steps?: ClaimSteps,
): T {
  const readable =
    settings.keyDerivationSecret !== undefined ||
    settings.propagateKeys === true ||
    steps ||
    someCoreDerives();
  // Inside another claimed run (a run() nested in a handler), a context of its own all the same:
  // the outer run's steps and keys are not this run's.
  if (!readable && currentClaim() === undefined) return fn();
  if (settings.propagateKeys === true) propagateOutboundCalls(); // once; normally done at boot
  return inClaimContext(recordKey, settings, fn, steps);
}
