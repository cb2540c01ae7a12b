/** Milliseconds per unit of a duration string. */
const UNITS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** A number, optionally with a fraction, then a unit; a string of digits alone is milliseconds. */
const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/;

/**
 * A duration in milliseconds: a number is taken as it is; a string is a number and a unit,
 * `'500ms'`, `'30s'`, `'2m'`, `'24h'`, `'1d'` (fractions allowed: `'1.5s'`), or digits alone for
 * milliseconds (`'30000'`, as environment variables give them). Throws a TypeError naming the
 * option for any other string. Whether the result is a usable duration (a positive whole number)
 * is for the caller to check.
 */
export function parseDuration(value: number | string, name: string): number {
  if (typeof value !== 'string') return value;
  const match = DURATION.exec(value.trim());
  if (!match) {
    throw new TypeError(
      `${name} must be milliseconds or a duration string such as '500ms', '30s', '2m', '24h' ` +
        `or '1d', got ${JSON.stringify(value)}`,
    );
  }
  // Rounded: '0.1s' * 1000 is 100.00000000000001 in floating point.
  return Math.round(Number(match[1]) * UNITS[match[2] ?? 'ms'] * 1e6) / 1e6;
}
