import type { ClaimSteps } from '../core/steps';
import { type DerivationSettings, inClaimContext } from './claim-context';
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
 * resumable. The context is what derived keys, propagated keys and steps read, and nothing else:
 * a run with none of the three (no `keyDerivationSecret`, no `propagateKeys`, no `steps`) could
 * skip it, on that one condition.
 */
export function enterClaim<T>(
  recordKey: string,
  settings: DerivationSettings,
  fn: () => T,
  steps?: ClaimSteps,
): T {
  if (settings.propagateKeys === true) propagateOutboundCalls(); // once; normally done at boot
  return inClaimContext(recordKey, settings, fn, steps);
}
