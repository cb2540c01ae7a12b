import { DEFAULT_REPLAY_HEADERS } from '../idempotency.constants';
import type {
  IdempotencyDurationOption,
  IdempotencyOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import { FACTORY_OPTION_NAMES } from './known-names';
import { ownOptions } from './own-options';

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
  resumable: false,
};

/**
 * Defaults of `@EventPattern` handlers where they differ: a duplicate event refused as in
 * progress would be lost on a broker that acks on delivery, so it waits for the outcome instead.
 */
export const EVENT_DEFAULTS: IdempotencyOptions = { onConflict: 'wait', waitTimeout: Infinity };

/**
 * Options that take a duration: milliseconds, or a string such as `'30s'` (see
 * `parseDuration`), turned into milliseconds here, once, wherever options enter.
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

/**
 * Merges route options over defaults, ignoring `undefined` values; normalises header names.
 * Every option name is an own property of the result (see `ownOptions`).
 */
export function mergeOptions<T extends ResolvedIdempotencyOptions>(
  base: T,
  ...overrides: (IdempotencyOptions | undefined)[]
): T {
  const merged: T = ownOptions(base, FACTORY_OPTION_NAMES);
  for (const override of overrides) {
    for (const [name, value] of Object.entries(override ?? {})) {
      if (value !== undefined) (merged as Record<string, unknown>)[name] = value;
    }
  }
  merged.replayHeaders = merged.replayHeaders.map((header) => header.toLowerCase());
  return merged;
}
