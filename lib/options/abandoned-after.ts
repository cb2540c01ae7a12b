import { parseDuration } from './duration';

/** Default of the module option `abandonedAfter`, in ms: 15 minutes. */
export const DEFAULT_ABANDONED_AFTER = 15 * 60_000;

/**
 * The module option `abandonedAfter` checked and in milliseconds: false when reporting is off,
 * the default when it is not set.
 * @throws TypeError naming the option for anything but a positive duration or false
 */
export function resolveAbandonedAfter(given: unknown): number | false {
  const where = 'IdempotencyModule: abandonedAfter';
  if (given === undefined) return DEFAULT_ABANDONED_AFTER;
  if (given === false) return false;
  const ms = typeof given === 'string' ? parseDuration(given, where) : given;
  if (!(typeof ms === 'number' && Number.isSafeInteger(ms) && ms > 0)) {
    throw new TypeError(
      `${where} must be a positive duration (ms, or a string such as '15m') or false, got ` +
        (typeof given === 'string' ? JSON.stringify(given) : String(given)),
    );
  }
  return ms;
}
