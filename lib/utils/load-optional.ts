/**
 * Optional peer dependencies (ioredis, @nestjs/microservices, @opentelemetry/api) are loaded on
 * first use, never at import: an app that does not use a feature need not install its package.
 * Every lazy load goes through this file, so the ESM and CJS builds differ in one place only.
 */

/** Loads `name`, or returns undefined when it is not installed. */
export function loadOptional<T>(name: string): T | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (error) {
    if ((error as { code?: string }).code === 'MODULE_NOT_FOUND') return undefined;
    throw error;
  }
}

/** Loads `name`, or throws an error that says which feature needs it and how to install it. */
export function loadPeer<T>(name: string, feature: string): T {
  const loaded = loadOptional<T>(name);
  if (loaded === undefined) {
    throw new Error(
      `IdempotencyModule: ${feature} needs the ${name} package. Install it: npm install ${name}`,
    );
  }
  return loaded;
}
