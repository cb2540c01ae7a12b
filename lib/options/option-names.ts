/**
 * Checks the names of an options object against the names it may hold: TypeScript catches a
 * misspelt name only in an inline literal, while JavaScript apps, options built elsewhere and
 * `forRootAsync` factories reach here unchecked. A misspelt name would otherwise be ignored, and
 * the option it meant would keep its default (plaintext where encryption was asked for).
 *
 * @param given the options as passed (only own enumerable keys are checked)
 * @param known every name this place takes
 * @param elsewhere names that belong at another level, with where they go
 *   (`{ redis: 'IdempotencyModule.forRoot()' }`): named as misplaced rather than unknown
 * @returns the problem, or undefined when every name is known
 */
export function unknownOptionProblem(
  given: object,
  known: readonly string[],
  elsewhere: Readonly<Record<string, string>> = {},
): string | undefined {
  for (const name of Object.keys(given)) {
    if (known.includes(name)) continue;
    const place = Object.hasOwn(elsewhere, name) ? elsewhere[name] : undefined;
    if (place !== undefined) return `\`${name}\` is not taken here: set it in ${place}`;
    const nearest = nearestName(name, [...known, ...Object.keys(elsewhere)]);
    // A name that belongs at another level says where it goes, or the fixed name fails again.
    const away =
      nearest !== undefined && !known.includes(nearest) && Object.hasOwn(elsewhere, nearest);
    const hint =
      nearest === undefined
        ? ''
        : away
          ? ` (did you mean \`${nearest}\`? it is not taken here: set it in ${elsewhere[nearest]})`
          : ` (did you mean \`${nearest}\`?)`;
    return `unknown option \`${name}\`${hint}`;
  }
  return undefined;
}

/**
 * The known name closest to `name` (case-insensitive edit distance, with a transposition
 * counting as one edit), when it is close enough to be a slip: at most a third of the longer
 * name's length, or a difference of case alone. Undefined otherwise.
 */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best === undefined) return undefined;
  const limit = Math.max(1, Math.floor(Math.max(name.length, best.length) / 3));
  return bestDistance <= limit ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, transpositions. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i]);
  for (let j = 1; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, rows[i - 2][j - 2] + 1);
      }
      rows[i][j] = best;
    }
  }
  return rows[a.length][b.length];
}
