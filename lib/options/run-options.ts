import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import type {
  IdempotencyRunOptions,
  IdempotencyStepOptions,
  IdempotentMethodOptions,
} from '../interfaces/idempotency-run-options.interface';
import {
  assertKnownNames,
  METHOD_OPTION_NAMES,
  RUN_OPTION_NAMES,
  STEP_OPTION_NAMES,
} from './known-names';
import { ownOptions } from './own-options';
import { validateOptions } from './route-options';

/** The scope of a run() call that sets none. */
export const DEFAULT_RUN_SCOPE = 'default';

/**
 * The options of one run() call that replace the module's for it, as set (an option left out, or
 * set to `undefined`, is absent: the module's value applies), with durations in milliseconds.
 */
export type RunOverrides = Partial<
  Pick<
    ResolvedIdempotencyOptions,
    'onConflict' | 'waitTimeout' | 'lockTtl' | 'ttl' | 'storeErrors' | 'transactional' | 'resumable'
  >
>;

/** What {@link resolveRunOptions} makes of run()'s options. */
export interface ResolvedRunOptions {
  /** What the key is unique within: the option `scope`, or `'default'`. */
  scope: string;
  /** The value identifying the work, as given (hashed by the caller); undefined for no check. */
  fingerprint: unknown;
  /** The options that replace the module's for this call (see {@link RunOverrides}). */
  overrides: RunOverrides;
}

/**
 * Checks the options of `IdempotencyService.run(key, fn, options)` before anything runs: their
 * names (an unknown one with the nearest known name, a route or module option with where it
 * goes), the scope (a non-empty string) and the values of the options that replace the
 * module's. Called first in run(), so that a misspelt `{ scpoe: 'orders' }` rejects before `fn`
 * runs instead of running it in scope `default`.
 *
 * @param given run()'s third argument (`undefined` for none)
 * @param where what the messages start with, e.g. `'IdempotencyService.run'`
 * @throws TypeError, e.g. "<where>: unknown option `scpoe` (did you mean `scope`?)",
 *   "<where>: scope must be a non-empty string", "<where> (<scope>): lockTtl must be ..."
 */
export function resolveRunOptions(given: unknown, where: string): ResolvedRunOptions {
  const common = commonRunOptions(given);
  if (common) return common;
  if (typeof (given ?? {}) !== 'object' || Array.isArray(given)) {
    throw new TypeError(`${where}: options must be an object, got ${describe(given)}`);
  }
  const options = ownOptions((given ?? {}) as IdempotencyRunOptions, RUN_OPTION_NAMES);
  assertKnownNames(options, RUN_OPTION_NAMES, where);
  const { scope = DEFAULT_RUN_SCOPE, fingerprint, ...rest } = options;
  if (typeof scope !== 'string' || scope === '') {
    throw new TypeError(`${where}: scope must be a non-empty string`);
  }
  const checked = validateOptions(rest, `${where} (${scope})`);
  const overrides = Object.fromEntries(
    Object.entries(checked).filter(([, value]) => value !== undefined),
  ) as RunOverrides;
  return { scope, fingerprint, overrides };
}

/** The overrides of a run() call that replaces none of the module's options: one object. */
export const NO_OVERRIDES: RunOverrides = Object.freeze({});
const DEFAULTS: ResolvedRunOptions = Object.freeze({
  scope: DEFAULT_RUN_SCOPE,
  fingerprint: undefined,
  overrides: NO_OVERRIDES,
});

/**
 * The usual options of a run() call, resolved without the general path's copies: none, or an
 * object literal (its prototype `Object.prototype`) whose own names (enumerable or not) are
 * `scope` (a non-empty string) and `fingerprint` only, which replace none of the module's options. Undefined for
 * anything else, which {@link resolveRunOptions} reads and checks in full (and an error names).
 */
function commonRunOptions(given: unknown): ResolvedRunOptions | undefined {
  if (given === undefined) return DEFAULTS;
  if (typeof given !== 'object' || given === null) return undefined;
  if (Reflect.getPrototypeOf(given) !== Object.prototype) return undefined;
  let scope: unknown = DEFAULT_RUN_SCOPE;
  let fingerprint: unknown;
  // Every own name, enumerable or not, as the full path reads them (a Symbol is no option).
  for (const name of Object.getOwnPropertyNames(given)) {
    if (name === 'scope') scope = (given as { scope: unknown }).scope;
    else if (name === 'fingerprint') fingerprint = (given as { fingerprint: unknown }).fingerprint;
    else return undefined;
  }
  if (scope === undefined) scope = DEFAULT_RUN_SCOPE;
  if (typeof scope !== 'string' || scope === '') return undefined;
  return { scope, fingerprint, overrides: NO_OVERRIDES };
}

/**
 * Checks the options of `@IdempotentMethod({...})` when the decorator is evaluated (when its
 * class is loaded): names as {@link resolveRunOptions} does, plus the `key` function, then the
 * values run() would refuse on every call. `key` and `fingerprint` must be functions of the
 * method's arguments.
 *
 * @returns the options as their own properties (see `ownOptions`), for the decorator to read
 * @throws TypeError `@IdempotentMethod(): ...`
 */
export function checkMethodOptions<A extends unknown[]>(
  given: IdempotentMethodOptions<A>,
): IdempotentMethodOptions<A> {
  const where = '@IdempotentMethod()';
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new TypeError(`${where} takes options with a \`key\` function, got ${describe(given)}`);
  }
  const options = ownOptions(given, METHOD_OPTION_NAMES);
  assertKnownNames(options, METHOD_OPTION_NAMES, where);
  const { key, fingerprint, ...rest } = options;
  if (typeof key !== 'function') {
    throw new TypeError(`${where} goes on a method, with a \`key\` function`);
  }
  if (fingerprint !== undefined && typeof fingerprint !== 'function') {
    throw new TypeError(
      `${where}: fingerprint must be a function of the method's arguments, got ${typeof fingerprint}`,
    );
  }
  resolveRunOptions(rest, where);
  return options;
}

/**
 * Checks the options of `IdempotencyService.step(name, fn, options)`, before the step runs: only
 * `transactional`, a boolean or `{ connectionName?: string }`.
 *
 * @param given step()'s third argument (`undefined` for none)
 * @throws TypeError `<where>: ...`
 */
export function checkStepOptions(given: unknown, where: string): IdempotencyStepOptions {
  if (given === undefined) return {};
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new TypeError(`${where}: options must be an object, got ${describe(given)}`);
  }
  const options = ownOptions(given as IdempotencyStepOptions, STEP_OPTION_NAMES);
  assertKnownNames(options, STEP_OPTION_NAMES, where);
  return validateOptions(options, where);
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'function') return 'a function';
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
