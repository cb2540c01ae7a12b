import { AsyncLocalStorage } from 'node:async_hooks';
import type { ClaimSteps } from '../core/steps';

/**
 * What a claimed run's async context knows: what keys derived in it are derived from, and, in a
 * resumable run, its steps. Only the claim core and the step runner make one.
 */
export interface ClaimContext {
  /**
   * What derived keys are derived from: the record's store key (prefix and the hash of route or
   * key space, scope and client key); inside a step, the step's (see {@link inStepContext}).
   */
  recordKey: string;
  /** The module's `keyDerivationSecret`, or undefined when none was set. */
  secret: string | Buffer | undefined;
  /** Whether outbound calls made here carry derived keys (option `propagateKeys`). */
  propagate: boolean;
  /** Calls made so far per label, for the ordinals of propagated keys (per step, in a step). */
  calls: Map<string, number>;
  /** The run's steps (option `resumable`); undefined in a run that is not resumable. */
  steps: ClaimSteps | undefined;
  /** The step whose function runs in this context; undefined outside any step. */
  step: { index: number; name: string } | undefined;
}

/** The settings of a claimed run that matter to derivation. */
export interface DerivationSettings {
  /** The module's {@link IdempotencyModuleOptions.keyDerivationSecret}. */
  keyDerivationSecret?: string | Buffer;
  /** The route's {@link IdempotencyOptions.propagateKeys}. */
  propagateKeys?: boolean;
}

const claims = new AsyncLocalStorage<ClaimContext>();
/**
 * The claim cores of this process, by whether their module set a `keyDerivationSecret`. A core
 * without one enters no context for runs that need none (see `enterClaim`), so that
 * derivedIdempotencyKey() there finds no claim: it still fails as the configuration error it is
 * when no core of the process can derive keys at all (see {@link derivationUnconfigured}).
 */
const cores = { withSecret: 0, withoutSecret: 0 };

/** Counts a claim core, by whether its module set a `keyDerivationSecret`. */
export function noteClaimCore(secret: unknown): void {
  if (secret === undefined) cores.withoutSecret++;
  else cores.withSecret++;
}

/**
 * Whether some claim core of this process has a `keyDerivationSecret`: then every claim enters a
 * context, so that derivedIdempotencyKey() in a handler of a module without one fails as the
 * configuration error it is, rather than as "no claim" (see `enterClaim`).
 */
export function someCoreDerives(): boolean {
  return cores.withSecret > 0;
}

/** Whether this process has claim cores and none of them has a `keyDerivationSecret`. */
export function derivationUnconfigured(): boolean {
  return cores.withSecret === 0 && cores.withoutSecret > 0;
}

/** Marks a request of a resumable route that runs without a claim (see {@link inUnclaimedRun}). */
const unclaimed = new AsyncLocalStorage<true>();

/**
 * Runs `fn` in a claim's context (see `runClaimed`, which also wraps the outbound clients).
 *
 * @param recordKey the store key of the claimed record (never the client's raw key)
 * @param steps the run's steps, when it is resumable
 */
export function inClaimContext<T>(
  recordKey: string,
  settings: DerivationSettings,
  fn: () => T,
  steps?: ClaimSteps,
): T {
  const context: ClaimContext = {
    recordKey,
    secret: settings.keyDerivationSecret,
    propagate: settings.propagateKeys === true,
    calls: new Map(),
    steps,
    step: undefined,
  };
  return claims.run(context, fn);
}

/**
 * Runs `fn`, the handler of a request on a resumable route that has no claim (no key, or
 * `failOpen` with the store down), so that its steps run as plain calls: it runs unprotected, as
 * any handler does without a key, rather than failing at its first step.
 */
export function inUnclaimedRun<T>(fn: () => T): T {
  return unclaimed.run(true, fn);
}

/** Whether the caller is in a request of a resumable route that runs without a claim. */
export function isUnclaimedRun(): boolean {
  return unclaimed.getStore() === true;
}

/** The context of the claimed run the caller is in, or undefined outside one. */
export function currentClaim(): ClaimContext | undefined {
  return claims.getStore();
}

/**
 * Runs a step's function in a context of its own below the run's (`parent`): keys derived and
 * propagated in it derive from `<record key>\0step\0<index>\0<name>`, and its propagated calls
 * are numbered per step. A provider then sees a re-run of the step as a retry of that step, and
 * two steps never send the same key, whatever the other steps of the run did before them. The
 * index is digits, so the name (any text) cannot make two steps' texts equal.
 */
export function inStepContext<T>(
  parent: ClaimContext,
  index: number,
  name: string,
  fn: () => T,
): T {
  const context: ClaimContext = {
    ...parent,
    recordKey: `${parent.recordKey}\0step\0${index}\0${name}`,
    calls: new Map(),
    step: { index, name },
  };
  return claims.run(context, fn);
}
