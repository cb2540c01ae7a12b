import {
  DEFAULT_REPLAY_HEADERS,
  FORBIDDEN_REPLAY_HEADERS,
  REPLAYED_HEADER,
} from '../idempotency.constants';
import type {
  IdempotencyDurationOption,
  IdempotencyModuleOptions,
  IdempotencyOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import { checkPostgresOption } from '../stores/postgres/postgres-options';
import { parseDuration } from './duration';
import { checkEncryptionOption } from '../utils/encryption';
import { checkMysqlOption } from '../stores/mysql/mysql-options';
import { secretProblem } from '../propagation/derived-key';

/** Defaults of every route option. */
export const DEFAULT_OPTIONS: ResolvedIdempotencyOptions = {
  enabled: true,
  headerName: 'Idempotency-Key',
  ttl: 24 * 60 * 60 * 1000,
  lockTtl: 30_000,
  maxLockHold: 60 * 60 * 1000,
  required: false,
  fingerprint: true,
  failOpen: false,
  replayHeaders: DEFAULT_REPLAY_HEADERS,
  maxResponseBytes: 1024 * 1024,
  maxKeyLength: 255,
  keyPrefix: 'idempotency:',
  storeTimeout: 2_000,
  onConflict: 'reject',
  waitTimeout: 10_000,
  compression: { algorithm: 'brotli', threshold: 1024 },
  problemDetails: false,
  storeErrors: [],
  transactional: false,
  statusHeader: false,
  propagateKeys: false,
};

const ALGORITHMS = ['brotli', 'gzip', 'deflate'];
const LEVELS: Record<string, [number, number]> = { brotli: [0, 11], gzip: [1, 9], deflate: [1, 9] };

/**
 * Options that take a duration: milliseconds, or a string such as `'30s'` (see
 * {@link parseDuration}), turned into milliseconds here, once, wherever options enter.
 */
export const DURATION_OPTIONS: readonly IdempotencyDurationOption[] = [
  'ttl',
  'lockTtl',
  'storeTimeout',
  'waitTimeout',
  'maxLockHold',
];

/** Options with their durations in milliseconds. */
export type WithDurations<T> = Omit<T, IdempotencyDurationOption> &
  Partial<Record<IdempotencyDurationOption, number>>;

/** Options that are positive whole numbers (milliseconds, bytes or characters). */
const COUNTS = [
  'ttl',
  'lockTtl',
  'storeTimeout',
  'maxResponseBytes',
  'maxKeyLength',
  'waitTimeout',
  'maxLockHold',
] as const;
/** Options that set a Node timer (lockTtl: its third), which fires at once past 2^31 - 1 ms. */
const TIMERS = ['lockTtl', 'storeTimeout', 'waitTimeout'] as const;
const MAX_TIMER_MS = 2 ** 31 - 1;
const FLAGS = ['enabled', 'required', 'failOpen', 'propagateKeys'] as const;
const FUNCTIONS = ['key', 'onReplay', 'onReject'] as const;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Headers the outcome header may not be named: they mean something else to clients and proxies. */
const RESERVED_STATUS_HEADERS = new Set([
  ...FORBIDDEN_REPLAY_HEADERS,
  ...DEFAULT_REPLAY_HEADERS,
  REPLAYED_HEADER.toLowerCase(),
  'retry-after',
  'idempotency-key',
]);

/**
 * Checks options set in `forRoot()` or `@Idempotent()` and throws a clear error at bootstrap (or
 * when the decorator is evaluated) instead of misbehaving on the first request. Returns a copy
 * with every duration in milliseconds.
 */
export function validateOptions<T extends IdempotencyOptions>(
  given: T,
  where: string,
): WithDurations<T> {
  const fail = (message: string): never => {
    throw new TypeError(`${where}: ${message}`);
  };
  const options = resolveDurations(given, fail);
  for (const name of COUNTS) {
    const value = options[name];
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      fail(`${name} must be a positive whole number, got ${String(value)}`);
    }
  }
  for (const name of TIMERS) {
    const value = options[name];
    if (value !== undefined && value > MAX_TIMER_MS) {
      fail(`${name} must be at most ${MAX_TIMER_MS} ms (about 24.8 days), got ${value}`);
    }
  }
  for (const name of FLAGS) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean') {
      fail(`${name} must be a boolean, got ${typeof options[name]}`);
    }
  }
  for (const name of FUNCTIONS) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      fail(`${name} must be a function, got ${typeof options[name]}`);
    }
  }
  const { scope, fingerprint, keySpace, statusHeader, storeErrors } = options;
  if (fingerprint !== undefined && !['boolean', 'function'].includes(typeof fingerprint)) {
    fail(`fingerprint must be a boolean or a function, got ${typeof fingerprint}`);
  }
  if (keySpace !== undefined && (typeof keySpace !== 'string' || keySpace === '')) {
    fail(`keySpace must be a non-empty string, got ${JSON.stringify(keySpace) ?? typeof keySpace}`);
  }
  if (
    statusHeader !== undefined &&
    typeof statusHeader !== 'boolean' &&
    !(typeof statusHeader === 'string' && HEADER_NAME.test(statusHeader))
  ) {
    fail(
      `statusHeader must be a boolean or a valid HTTP header name, got ${JSON.stringify(statusHeader)}`,
    );
  }
  if (
    typeof statusHeader === 'string' &&
    (RESERVED_STATUS_HEADERS.has(statusHeader.toLowerCase()) ||
      statusHeader.toLowerCase() === options.headerName?.toLowerCase())
  ) {
    fail(`statusHeader cannot be ${statusHeader}: that header means something else`);
  }
  const { transactional } = options;
  if (
    transactional !== undefined &&
    typeof transactional !== 'boolean' &&
    !(
      typeof transactional === 'object' &&
      transactional !== null &&
      ['undefined', 'string'].includes(typeof transactional.connectionName)
    )
  ) {
    fail('transactional must be a boolean or { connectionName?: string }');
  }
  if (storeErrors !== undefined) {
    if (!Array.isArray(storeErrors)) fail('storeErrors must be an array');
    for (const matcher of storeErrors) {
      const valid =
        typeof matcher === 'function' ||
        (typeof matcher === 'number' &&
          Number.isInteger(matcher) &&
          matcher >= 100 &&
          matcher <= 599) ||
        (typeof matcher === 'string' && /^[1-5]xx$/.test(matcher));
      if (!valid) {
        fail(
          `storeErrors holds ${JSON.stringify(matcher) ?? typeof matcher}: use an HTTP status (402), a class of statuses ('4xx'), an exception class or a predicate`,
        );
      }
    }
  }
  if (scope !== undefined && typeof scope !== 'function' && scope !== 'public') {
    fail(`scope must be a function or 'public', got ${JSON.stringify(scope) ?? typeof scope}`);
  }
  if (options.lockTtl !== undefined && options.lockTtl < 3) {
    fail('lockTtl must be at least 3 ms (the lease is renewed every third of it)');
  }
  if (options.headerName !== undefined && !HEADER_NAME.test(options.headerName)) {
    fail(`headerName must be a valid HTTP header name, got ${JSON.stringify(options.headerName)}`);
  }
  if (options.keyPrefix !== undefined && typeof options.keyPrefix !== 'string') {
    fail(`keyPrefix must be a string, got ${typeof options.keyPrefix}`);
  }
  if (options.onConflict !== undefined && !['reject', 'wait'].includes(options.onConflict)) {
    fail(`onConflict must be 'reject' or 'wait', got ${JSON.stringify(options.onConflict)}`);
  }
  validateCompression(options.compression, fail);
  const problem = options.problemDetails;
  if (
    problem !== undefined &&
    typeof problem !== 'boolean' &&
    typeof (problem as { typeBaseUri?: unknown })?.typeBaseUri !== 'string'
  ) {
    fail('problemDetails must be a boolean or { typeBaseUri: string }');
  }
  if (options.replayHeaders !== undefined) {
    if (!Array.isArray(options.replayHeaders))
      fail('replayHeaders must be an array of header names');
    for (const header of options.replayHeaders!) {
      if (typeof header !== 'string' || !HEADER_NAME.test(header)) {
        fail(`replayHeaders holds an invalid header name: ${JSON.stringify(header)}`);
      }
      if (FORBIDDEN_REPLAY_HEADERS.includes(header.toLowerCase())) {
        fail(`${header} can never be stored or replayed`);
      }
    }
  }
  return options;
}

/** A copy of `options` with each duration string turned into milliseconds. */
function resolveDurations<T extends IdempotencyOptions>(
  options: T,
  fail: (message: string) => never,
): WithDurations<T> {
  const resolved = { ...options } as WithDurations<T>;
  for (const name of DURATION_OPTIONS) {
    const value = options[name];
    if (typeof value !== 'string') continue;
    try {
      resolved[name] = parseDuration(value, name);
    } catch (error) {
      fail((error as Error).message);
    }
  }
  return resolved;
}

function validateCompression(
  compression: IdempotencyOptions['compression'],
  fail: (message: string) => never,
): void {
  if (compression === undefined || compression === false) return;
  if (typeof compression !== 'object' || compression === null) {
    fail('compression must be false or { algorithm?, threshold?, level? }');
  }
  const { algorithm = 'brotli', threshold, level } = compression;
  if (!ALGORITHMS.includes(algorithm)) {
    fail(`compression.algorithm must be one of ${ALGORITHMS.join(', ')}, got ${String(algorithm)}`);
  }
  if (threshold !== undefined && !(Number.isSafeInteger(threshold) && threshold >= 0)) {
    fail(`compression.threshold must be a whole number of bytes, got ${String(threshold)}`);
  }
  const [min, max] = LEVELS[algorithm];
  if (level !== undefined && !(Number.isInteger(level) && level >= min && level <= max)) {
    fail(`compression.level for ${algorithm} must be ${min} to ${max}, got ${String(level)}`);
  }
}

const STORE_METHODS = ['claim', 'complete', 'release', 'extend'] as const;

/** Checks what only the module takes: the store or Redis connection, listeners and switches. */
function validateModuleOptions(options: IdempotencyModuleOptions): void {
  const fail = (message: string): never => {
    throw new TypeError(`IdempotencyModule: ${message}`);
  };
  const { store, redis } = options;
  if (store !== undefined) {
    const methods = store as unknown as Record<string, unknown> | null;
    if (!STORE_METHODS.every((method) => typeof methods?.[method] === 'function')) {
      fail(
        'store must be an IdempotencyStore (claim, complete, release, extend); pass an ioredis client as `redis`',
      );
    }
  }
  if (redis !== undefined) {
    if (typeof redis === 'string' ? redis.trim() === '' : typeof redis !== 'object' || !redis) {
      fail('redis must be a Redis URL, ioredis options, { clusterNodes } or an ioredis client');
    }
    const nodes = (redis as { clusterNodes?: unknown }).clusterNodes;
    if (nodes !== undefined && !(Array.isArray(nodes) && nodes.length > 0)) {
      fail('redis.clusterNodes must be a non-empty array of nodes');
    }
  }
  if (options.postgres !== undefined) {
    if (redis !== undefined) fail('redis and postgres are two stores: set one of them');
    const problem = checkPostgresOption(options.postgres);
    if (problem) fail(problem);
  }
  if (options.mysql !== undefined) {
    if (redis !== undefined || options.postgres !== undefined) {
      fail('mysql is a store of its own: set one of redis, postgres and mysql');
    }
    const problem = checkMysqlOption(options.mysql);
    if (problem) fail(problem);
  }
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
  if (typeof options === 'object' && options !== null && !Array.isArray(options)) return;
  const got = Array.isArray(options)
    ? 'an array'
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
 * Defaults of `@EventPattern` handlers where they differ: a duplicate event refused as in
 * progress would be lost on a broker that acks on delivery, so it waits for the outcome instead.
 */
const EVENT_DEFAULTS: IdempotencyOptions = { onConflict: 'wait', waitTimeout: Infinity };

/** The module's options with every default filled in. */
export type ResolvedModuleOptions = ResolvedIdempotencyOptions &
  IdempotencyModuleOptions & {
    /** The event defaults the module options leave in force (module options win over them). */
    eventDefaults?: IdempotencyOptions;
  };

/** Validates the module options and fills in every default. */
export function resolveModuleOptions(given: IdempotencyModuleOptions): ResolvedModuleOptions {
  // forRoot() checks its argument itself: what reaches here unchecked came from a factory.
  assertOptionsObject(given, 'forRootAsync');
  const options = validateOptions(given, 'IdempotencyModule');
  validateModuleOptions(options);
  const eventDefaults = Object.fromEntries(
    Object.entries(EVENT_DEFAULTS).filter(
      ([name]) => options[name as keyof IdempotencyOptions] === undefined,
    ),
  );
  return { ...mergeOptions(DEFAULT_OPTIONS, options), eventDefaults };
}

/** Merges route options over defaults, ignoring `undefined` values; normalises header names. */
export function mergeOptions<T extends ResolvedIdempotencyOptions>(
  base: T,
  ...overrides: (IdempotencyOptions | undefined)[]
): T {
  const merged: T = { ...base };
  for (const override of overrides) {
    for (const [name, value] of Object.entries(override ?? {})) {
      if (value !== undefined) (merged as Record<string, unknown>)[name] = value;
    }
  }
  merged.replayHeaders = merged.replayHeaders.map((header) => header.toLowerCase());
  return merged;
}
