/**
 * Optional peer dependencies (ioredis, @nestjs/microservices, @opentelemetry/api) are loaded on
 * first use, never at import: an app that does not use a feature need not install its package.
 * Every lazy load goes through this file, so the ESM and CJS builds differ in one place only.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * This file's URL. CommonJS has `__filename` and no `import.meta`, ESM the reverse, and each is an
 * error in the other, so the source says `pathToFileURL(__filename).href` and the ESM build
 * rewrites exactly that expression to `import.meta.url` (compat/finish-esm-build.mjs).
 */
const HERE = pathToFileURL(__filename).href;

/**
 * A `require` that resolves from this package's own folder, as a static import would (so pnpm's
 * strict layout finds the app's peers too). In the ESM build it loads ESM-only peers such as
 * @nestjs/microservices 12 through Node's require(esm) (Node >= 20.19), which hands back the same
 * module instance the app imported.
 */
const requireFromHere = createRequire(HERE);

/** Loads `name`, or returns undefined when it is not installed. */
export function loadOptional<T>(name: string): T | undefined {
  try {
    return requireFromHere(name) as T;
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

/**
 * The path of `file` in the package `name` that the installed package `from` loads (its own
 * copy, as pnpm's strict layout gives it), or undefined when either is not installed.
 */
export function peerFile(from: string, name: string, file: string): string | undefined {
  try {
    const fromPeer = createRequire(requireFromHere.resolve(from));
    return join(dirname(fromPeer.resolve(`${name}/package.json`)), file);
  } catch {
    return undefined;
  }
}

/**
 * A folder at the package root, such as `lua/`: the nearest one above this file. The sources
 * (lib/, under ts-jest), the CJS build (dist/) and the ESM build (dist/esm/) sit at different
 * depths below the root, and only the root's `lua/` ships in the package.
 */
export function packageFolder(name: string): string {
  for (let dir = dirname(fileURLToPath(HERE)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, name))) return join(dir, name);
    if (dirname(dir) === dir)
      throw new Error(`nestjs-idempotency: no ${name}/ folder above ${HERE}`);
  }
}
