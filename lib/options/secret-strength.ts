/**
 * Fewest bits a secret's symbol counts may estimate it at (see {@link obviousWeakness}).
 *
 * Why 48: the estimate is the length times the Shannon entropy of the frequencies of the
 * symbols seen (and, apart, of the steps between neighbours). Random keys score far above it:
 * over a million keys per form, the lowest seen were 208 bits for 32 random bytes in hex, 186 in
 * base64, 130 as 32 raw bytes, 88 for 16 random bytes in hex (32 characters) and 75 for 32
 * random decimal digits, the poorest alphabet a key would be written in. The chance that 32
 * random decimal digits score under 48 is 3e-15 (counted exactly over their frequency
 * profiles); 32 hex characters, 2e-20; longer keys and larger alphabets, far less. What scores
 * under it is a few symbols repeated ('a' x 31 + 'b', 28 zeros and '1234') or a walk
 * ('abcdef...', bytes 0 to 31), which no source of random secrets produces.
 */
const MIN_ESTIMATED_BITS = 48;

/**
 * Why `secret` is obviously not secret, or undefined when nothing obvious is wrong with it: all
 * whitespace, one symbol repeated, a short pattern repeated (one that fits at least twice), or
 * too little variety in its symbols or in the steps between them (a handful of values, a run
 * such as `abcdef...`). A pattern that fits twice in a random key of 32 symbols has a chance
 * under 1e-16 even for decimal digits. Strings are read as characters, Buffers as bytes. Never names the
 * secret's content: the reason ends up in logs.
 *
 * It catches placeholders and accidents (`' '.repeat(32)`, `Buffer.alloc(32)`,
 * `'changeme'.repeat(4)`), not weak secrets in general: a dictionary phrase passes. Thresholds
 * are set so that a key from a random source is never refused (see {@link MIN_ESTIMATED_BITS}).
 */
export function obviousWeakness(secret: string | Buffer): string | undefined {
  const text = typeof secret === 'string';
  const unit = text ? 'character' : 'byte';
  if (text && secret.trim() === '') return 'it is whitespace only';
  const values = text ? Array.from(secret, (char) => char.codePointAt(0)!) : [...secret];
  if (new Set(values).size === 1) return `it is one ${unit} repeated`;
  const period = smallestPeriod(values);
  if (period <= values.length / 2) return `it repeats a pattern of ${period} ${unit}s`;
  // Bytes wrap around (0xff then 0x00 is a step of 1); characters do not.
  const steps = values
    .slice(1)
    .map((value, i) => (text ? value - values[i] : (value - values[i] + 256) % 256));
  const bits = Math.min(estimatedBits(values), estimatedBits(steps));
  if (bits < MIN_ESTIMATED_BITS) {
    return (
      `it has too little variety (its ${unit}s, or the steps between them, carry about ` +
      `${Math.floor(bits)} bits; a random key carries over 90)`
    );
  }
  return undefined;
}

/**
 * The shortest p such that every value equals the one p places later (the length itself when
 * there is none), from the prefix function: O(n), whatever the secret's length.
 */
function smallestPeriod(values: readonly number[]): number {
  const border: number[] = [0];
  for (let i = 1, k = 0; i < values.length; i++) {
    while (k > 0 && values[i] !== values[k]) k = border[k - 1];
    if (values[i] === values[k]) k++;
    border[i] = k;
  }
  return values.length - border[values.length - 1];
}

/** Length times the Shannon entropy of the value frequencies seen, in bits. */
function estimatedBits(values: readonly number[]): number {
  const counts = new Map<number, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) bits -= count * Math.log2(count / values.length);
  return bits;
}
