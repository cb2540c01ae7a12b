import { createHmac } from 'node:crypto';
import { type ClaimContext, currentClaim } from './claim-context';

export { type DerivationSettings, inClaimContext } from './claim-context';

/** Tells the derivation apart from any other use of the same secret. */
const DOMAIN = 'nestjs-idempotency derived key v1';

/**
 * A key for one downstream call of the running claimed handler (an `Idempotency-Key` to send to
 * a payment provider, another service, a job queue): the same on every re-run of the same
 * request, in any process or replica sharing the module's `keyDerivationSecret`, and different
 * for another request, another label or another secret. It is an HMAC-SHA-256 of the record
 * (route or key space, scope, client key, as the store names the record) and `label`, in
 * base64url (43 characters); it reveals nothing of the client's key. Inside a step of a resumable
 * handler (`IdempotencyService.step()`), it is derived from the step (its place and name) instead:
 * the same every time that step runs for the request, another in another step.
 *
 * @param label what the call is, stable across re-runs (`'charge'`, `'POST https://api/x'`); one
 *   label names one call: two distinct charges need two labels
 * @throws Error outside a claimed handler (no key, `failOpen`, a route without `@Idempotent()`),
 *   or when the module has no `keyDerivationSecret`; see {@link tryDerivedIdempotencyKey}
 */
export function derivedIdempotencyKey(label: string): string {
  const context = currentClaim();
  if (!context) {
    throw new Error(
      'derivedIdempotencyKey() is only available inside a claimed @Idempotent() handler ' +
        '(a keyed request that claimed its key); use tryDerivedIdempotencyKey() where there may be none',
    );
  }
  return derive(context, label);
}

/**
 * {@link derivedIdempotencyKey}, or undefined outside a claimed handler (a request without a key,
 * one running unprotected with `failOpen`). Still throws when the module has no
 * `keyDerivationSecret`: that is a configuration error, not a missing claim.
 */
export function tryDerivedIdempotencyKey(label: string): string | undefined {
  const context = currentClaim();
  return context ? derive(context, label) : undefined;
}

/**
 * The key an outbound call to `label` carries, when the running handler propagates keys: the
 * first call with a label is keyed by the label, the nth (n >= 2) by `label #n`, so two calls to
 * one endpoint get two keys, each stable across re-runs that make them in the same order.
 * Undefined outside a propagating handler.
 */
export function propagatedKey(label: string): string | undefined {
  const context = currentClaim();
  if (!context?.propagate) return undefined;
  const n = (context.calls.get(label) ?? 0) + 1;
  context.calls.set(label, n);
  return derive(context, n === 1 ? label : `${label} #${n}`);
}

/** Whether the current async context is a handler with `propagateKeys` (cheap: no key made). */
export function isPropagating(): boolean {
  return currentClaim()?.propagate === true;
}

function derive(context: ClaimContext, label: string): string {
  if (typeof label !== 'string')
    throw new TypeError('derivedIdempotencyKey: label must be a string');
  if (context.secret === undefined) {
    throw new Error(
      'derivedIdempotencyKey() needs IdempotencyModule.forRoot({ keyDerivationSecret }): a secret ' +
        'of at least 32 bytes, the same in every replica, so a re-run elsewhere derives the same key',
    );
  }
  return deriveKey(context.secret, context.recordKey, label);
}

/**
 * The derivation itself (pure): HMAC-SHA-256 keyed by `secret` over the record key and the
 * label, in base64url. Exported for tests and for computing a key outside the request.
 */
export function deriveKey(secret: string | Buffer, recordKey: string, label: string): string {
  return createHmac('sha256', secret)
    .update(`${DOMAIN}\0${recordKey}\0${label}`)
    .digest('base64url');
}
