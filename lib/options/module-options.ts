import type {
  IdempotencyOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import type { IdempotencyModuleOptions } from '../interfaces/idempotency-module-options.interface';
import { resolveAbandonedAfter } from './abandoned-after';
import { parseDuration } from './duration';
import { DEFAULT_OPTIONS, EVENT_DEFAULTS, mergeOptions } from './defaults';
import {
  ASYNC_OPTION_NAMES,
  assertKnownNames,
  FACTORY_OPTION_NAMES,
  LOCAL_REPLAY_CACHE_OPTION_NAMES,
  plainOptions,
  ROOT_OPTION_NAMES,
} from './known-names';
import { validateOptions } from './route-options';
import { checkEncryptionOption, secretProblem } from './secrets';

/**
 * Checks what only the module takes: listeners, switches and secrets. The store options
 * (`store`, `redis`, `postgres`, `mysql`) are checked by the stores where the store is created
 * (`checkStoreOptions`, at boot too), their names here.
 */
function validateModuleOptions(options: IdempotencyModuleOptions): void {
  const fail = (message: string): never => {
    throw new TypeError(`IdempotencyModule: ${message}`);
  };
  if (options.onEvent !== undefined && typeof options.onEvent !== 'function') {
    fail(`onEvent must be a function, got ${typeof options.onEvent}`);
  }
  if (options.metrics !== undefined && typeof options.metrics !== 'boolean') {
    fail(`metrics must be a boolean, got ${typeof options.metrics}`);
  }
  const { allowInMemoryStorage } = options;
  if (allowInMemoryStorage !== undefined && typeof allowInMemoryStorage !== 'boolean') {
    fail(`allowInMemoryStorage must be a boolean, got ${typeof allowInMemoryStorage}`);
  }
  if (options.encryption !== undefined) {
    const problem = checkEncryptionOption(options.encryption);
    if (problem) fail(problem);
  }
  if (options.keyDerivationSecret !== undefined) {
    const problem = secretProblem(options.keyDerivationSecret);
    if (problem) fail(problem);
  }
}

/**
 * Throws unless `options` is an options object: what `forRootAsync`'s factory returned (its
 * result is not type-checked when it comes from configuration), or a JavaScript caller's
 * `forRoot` argument. Left alone, `undefined` or `null` failed with a TypeError deep in the
 * module, and a string (a Redis URL returned by mistake) silently gave the in-memory store.
 */
export function assertOptionsObject(options: unknown, where: 'forRoot' | 'forRootAsync'): void {
  const collection = options instanceof Map || options instanceof Set;
  if (typeof options === 'object' && options !== null && !Array.isArray(options) && !collection) {
    return;
  }
  const got = Array.isArray(options)
    ? 'an array'
    : collection
      ? `a ${options.constructor.name} (its entries are not options)`
      : typeof options === 'string'
        ? JSON.stringify(options)
        : String(options);
  const what = where === 'forRoot' ? 'was given' : 'factory returned';
  throw new TypeError(
    `IdempotencyModule.${where}: the options ${what} ${got}; it must return an options object, ` +
      `e.g. { redis: 'redis://...' } ({} for the defaults)`,
  );
}

/**
 * Checks `IdempotencyModule.forRoot()`'s argument where it is called, so that the stack points
 * at the app's module: an options object whose every name is a module option, `isGlobal` or
 * `globalInterceptor`. Its values are checked at bootstrap ({@link resolveModuleOptions}).
 *
 * @throws TypeError, e.g. "IdempotencyModule: unknown option `encrypton` (did you mean
 *   `encryption`?)"
 */
export function checkForRootOptions(options: unknown): void {
  assertOptionsObject(options, 'forRoot');
  assertKnownNames(plainOptions(options as object), ROOT_OPTION_NAMES, 'IdempotencyModule');
}

/**
 * Checks `IdempotencyModule.forRootAsync()`'s own options where it is called: only `imports`,
 * `inject`, `useFactory`, `useClass`, `useExisting`, `provideInjectionTokensFrom`, `isGlobal`
 * and `globalInterceptor`. Nest takes any other name as an extra and drops it, so a module
 * option set here (`redis`) or a misspelt `useFactroy` was ignored without a word.
 *
 * @throws TypeError naming the option, and where a module option goes (the factory's result)
 */
export function checkForRootAsyncOptions(options: unknown): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(
      'IdempotencyModule.forRootAsync: takes { useFactory, inject?, imports? }, { useClass } ' +
        `or { useExisting }, got ${Array.isArray(options) ? 'an array' : String(options)}`,
    );
  }
  assertKnownNames(options, ASYNC_OPTION_NAMES, 'IdempotencyModule.forRootAsync');
}

/** The option `localReplayCache` with its defaults filled in, its `ttl` in milliseconds. */
export interface LocalReplayCacheSettings {
  maxEntries: number;
  maxBytes: number;
  ttl: number;
}

/** Defaults of `localReplayCache: true` (see `IdempotencyLocalReplayCacheOptions`). */
const LOCAL_REPLAY_CACHE_DEFAULTS: LocalReplayCacheSettings = {
  maxEntries: 1_000,
  maxBytes: 16 * 1024 * 1024,
  ttl: 10_000,
};

/** The module's options with every default filled in. */
export type ResolvedModuleOptions = ResolvedIdempotencyOptions &
  Omit<IdempotencyModuleOptions, 'localReplayCache' | 'abandonedAfter'> & {
    /** The event defaults the module options leave in force (module options win over them). */
    eventDefaults?: IdempotencyOptions;
    /** `localReplayCache`, resolved; false when it is off. */
    localReplayCache: false | LocalReplayCacheSettings;
    /** `abandonedAfter` in milliseconds; false when reporting is off. */
    abandonedAfter: number | false;
  };

/**
 * `localReplayCache` checked (names and values) and resolved: false when off, else every
 * setting with its default, the `ttl` in milliseconds.
 */
function resolveLocalReplayCache(given: unknown): false | LocalReplayCacheSettings {
  const where = 'IdempotencyModule: localReplayCache';
  if (given === undefined || given === false) return false;
  if (given === true) return LOCAL_REPLAY_CACHE_DEFAULTS;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new TypeError(`${where} must be a boolean or { maxEntries?, maxBytes?, ttl? }`);
  }
  assertKnownNames(given, LOCAL_REPLAY_CACHE_OPTION_NAMES, where);
  const { maxEntries, maxBytes, ttl } = given as Record<string, unknown>;
  const settings = { ...LOCAL_REPLAY_CACHE_DEFAULTS };
  for (const [name, value] of Object.entries({ maxEntries, maxBytes })) {
    if (value === undefined) continue;
    if (!(typeof value === 'number' && Number.isSafeInteger(value) && value > 0)) {
      throw new TypeError(`${where}.${name} must be a positive whole number, got ${String(value)}`);
    }
    settings[name as 'maxEntries' | 'maxBytes'] = value;
  }
  if (ttl !== undefined) {
    const ms = typeof ttl === 'string' ? parseDuration(ttl, `${where}.ttl`) : (ttl as number);
    if (!(typeof ms === 'number' && Number.isSafeInteger(ms) && ms > 0)) {
      throw new TypeError(`${where}.ttl must be a positive duration, got ${String(ttl)}`);
    }
    settings.ttl = ms;
  }
  return settings;
}

/**
 * Validates the module options (names and values) and fills in every default. Runs at
 * bootstrap, on `forRoot()`'s options (without `isGlobal` and `globalInterceptor`, which Nest
 * takes out) or on what `forRootAsync()`'s factory returned.
 */
export function resolveModuleOptions(given: IdempotencyModuleOptions): ResolvedModuleOptions {
  // forRoot() checks its argument itself: what reaches here unchecked came from a factory.
  assertOptionsObject(given, 'forRootAsync');
  const plain = plainOptions(given, FACTORY_OPTION_NAMES);
  assertKnownNames(plain, FACTORY_OPTION_NAMES, 'IdempotencyModule');
  const options = validateOptions(plain, 'IdempotencyModule');
  validateModuleOptions(options);
  const eventDefaults = Object.fromEntries(
    Object.entries(EVENT_DEFAULTS).filter(
      ([name]) => options[name as keyof IdempotencyOptions] === undefined,
    ),
  );
  const localReplayCache = resolveLocalReplayCache(options.localReplayCache);
  const abandonedAfter = resolveAbandonedAfter(options.abandonedAfter);
  const merged = mergeOptions(DEFAULT_OPTIONS, options);
  return { ...merged, eventDefaults, localReplayCache, abandonedAfter };
}
