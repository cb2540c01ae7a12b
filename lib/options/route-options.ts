import {
  DEFAULT_REPLAY_HEADERS,
  FORBIDDEN_REPLAY_HEADERS,
  REPLAYED_HEADER,
} from '../idempotency.constants';
import type { IdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { DURATION_OPTIONS, type WithDurations } from './defaults';
import { parseDuration } from './duration';
import { assertKnownNames, nestedNamesProblem, ROUTE_OPTION_NAMES } from './known-names';
import { ownOptions } from './own-options';

const ALGORITHMS = ['brotli', 'gzip', 'deflate'];
const LEVELS: Record<string, [number, number]> = { brotli: [0, 11], gzip: [1, 9], deflate: [1, 9] };

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
const FLAGS = ['enabled', 'required', 'failOpen', 'propagateKeys', 'resumable'] as const;
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
 * The options of `@Idempotent({...})`, checked when the decorator is evaluated (when its class
 * is loaded): names, then values (see {@link validateOptions}). Returns a copy with every
 * duration in milliseconds.
 *
 * @throws TypeError naming `where` and the option: an unknown name with the nearest known one,
 *   a module option with where it goes (`forRoot()`), an invalid value
 */
export function resolveRouteOptions(
  given: IdempotencyOptions,
  where: string,
): WithDurations<IdempotencyOptions> {
  const plain = ownOptions(given, ROUTE_OPTION_NAMES);
  assertKnownNames(plain, ROUTE_OPTION_NAMES, where);
  return validateOptions(plain, where);
}

/**
 * Checks the values of route options set in `forRoot()`, `@Idempotent()` or `run()` and throws
 * a clear error at bootstrap (or when the decorator is evaluated) instead of misbehaving on the
 * first request; names are checked by the caller, which knows which names its place takes.
 * Returns a copy with every duration in milliseconds.
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
  // No control character: a record's scope is the key space, then its owner, joined by NUL
  // (core/record-key.ts), so a NUL in it would make two key spaces' records meet.
  if (
    keySpace !== undefined &&
    (typeof keySpace !== 'string' || keySpace === '' || hasControlCharacter(keySpace))
  ) {
    fail(
      `keySpace must be a non-empty string without control characters, got ${JSON.stringify(keySpace) ?? typeof keySpace}`,
    );
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
  // A slip inside an option's object is as silent as one at the top would be: a misspelt
  // connectionName writes the record through the default connection.
  for (const name of ['transactional', 'compression', 'problemDetails'] as const) {
    const problem = nestedNamesProblem(name, options[name]);
    if (problem) fail(problem);
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

/**
 * A copy of `options` with each duration string turned into milliseconds, every route option an
 * own property (run() and step() options are checked here too, by every route option's rule).
 */
function resolveDurations<T extends IdempotencyOptions>(
  options: T,
  fail: (message: string) => never,
): WithDurations<T> {
  const resolved = ownOptions(options, ROUTE_OPTION_NAMES) as WithDurations<T>;
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

/** Whether `text` holds a control character (U+0000 to U+001F, or DEL). */
function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}
