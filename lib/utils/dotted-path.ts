/**
 * A dotted path into a value (`'input.requestId'`): where a key is read from a message body or
 * a request's arguments. One reader for every such option (`keyFromArgument`, the SQS key).
 */
export type DottedPath = readonly string[];

/**
 * `path` split into its steps. Throws an Error naming `where` and an example when a step is
 * empty (`'a..b'`, a leading or trailing dot).
 */
export function parseDottedPath(path: string, where: string, example: string): DottedPath {
  const steps = path.split('.');
  if (steps.some((step) => step === '')) {
    throw new TypeError(`${where}: '${path}' is not a dotted path (e.g. '${example}')`);
  }
  return steps;
}

/**
 * The value at `path` in `value`: own properties only (never a prototype's), undefined when a
 * step is missing or not an object.
 */
export function valueAtPath(value: unknown, path: DottedPath): unknown {
  for (const step of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, step)) {
      return undefined;
    }
    value = (value as Record<string, unknown>)[step];
  }
  return value;
}
