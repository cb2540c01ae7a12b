import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';
import { assertKnownNames, namesOf, type OptionNames } from '../options/known-names';

/** What `IdempotencyOperatorPageModule.register()` takes. */
export interface IdempotencyOperatorPageOptions {
  /**
   * Where the app serves the page, e.g. `'/ops/idempotency'` (under the app's global prefix, if
   * it sets one). Required.
   */
  path: string;
  /**
   * The guards every page and action runs behind, as `@UseGuards()` takes them: classes with a
   * `canActivate` method (resolved through Nest's DI in this module, so their dependencies come
   * from `imports`) or instances.
   * The app's global guards (`APP_GUARD`) run before them, as on any route. A guard that throws
   * `UnauthorizedException` answers 401; one that returns `false`, 403. Required: `false` mounts
   * the page without a guard, which is refused at boot when `NODE_ENV` is `production` (for a
   * laptop, never a shared server).
   */
  guards: (Type<CanActivate> | CanActivate)[] | false;
  /** Modules the guards' dependencies come from (your `AuthModule`). Default: none. */
  imports?: ModuleMetadata['imports'];
  /** Whose records the page shows: records under this `keyPrefix`. Default: the module's. */
  keyPrefix?: string;
  /** Records per page of the list, 1 to 500. Default: 50. */
  pageSize?: number;
}

/** The options as the page uses them: `path` normalised, `pageSize` filled in. */
export interface ResolvedOperatorPageOptions {
  path: string;
  guards: (Type<CanActivate> | CanActivate)[];
  keyPrefix?: string;
  pageSize: number;
}

const WHERE = 'IdempotencyOperatorPageModule.register()';

/** The names `register()` takes. */
export const OPERATOR_PAGE_OPTION_NAMES: OptionNames = {
  known: namesOf<IdempotencyOperatorPageOptions>({
    path: true,
    guards: true,
    imports: true,
    keyPrefix: true,
    pageSize: true,
  }),
  elsewhere: {},
};

/** What a path may hold: segments of URL-safe characters (no query, fragment or parameters). */
const PATH = /^\/?[A-Za-z0-9._~-]+(?:\/[A-Za-z0-9._~-]+)*\/?$/;

/**
 * A guard class (its prototype has `canActivate`) or instance: a service, or a guard factory
 * passed uncalled (`AuthGuard` for `AuthGuard('jwt')`), is refused here rather than failing
 * every request with a 500.
 */
const isGuard = (guard: unknown): boolean => {
  const holder = typeof guard === 'function' ? (guard.prototype as unknown) : guard;
  return (
    typeof holder === 'object' &&
    holder !== null &&
    typeof (holder as CanActivate).canActivate === 'function'
  );
};

/**
 * Checks `register()`'s options by name and value and fills in the defaults. Throws a TypeError
 * naming the option (`unknown option \`gaurds\` (did you mean \`guards\`?)`), and refuses a page
 * without a guard when `NODE_ENV` is `production`.
 */
export function resolveOperatorPageOptions(
  given: unknown,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedOperatorPageOptions {
  const fail = (message: string): never => {
    throw new TypeError(`${WHERE}: ${message}`);
  };
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    return fail(`takes { path, guards }, got ${Array.isArray(given) ? 'an array' : given}`);
  }
  assertKnownNames(given, OPERATOR_PAGE_OPTION_NAMES, WHERE);
  const options = given as Partial<IdempotencyOperatorPageOptions>;
  const { path, guards, imports, keyPrefix, pageSize = 50 } = options;
  if (typeof path !== 'string' || !PATH.test(path)) {
    fail(
      `path must be a path such as '/ops/idempotency' (letters, digits, '.', '_', '~', '-' ` +
        `between slashes), got ${JSON.stringify(path)}`,
    );
  }
  if (guards === false) {
    if (env.NODE_ENV === 'production') {
      fail(
        'NODE_ENV is production and the page has no guard (guards: false): whoever reaches it ' +
          'could read and delete every record. Pass the guard your admin routes use, e.g. ' +
          'guards: [AdminGuard]',
      );
    }
  } else if (!Array.isArray(guards) || guards.length === 0 || !guards.every(isGuard)) {
    fail(
      'guards must list the guards the page runs behind, e.g. [AdminGuard] (classes with a ' +
        'canActivate method, or instances), or be false for a page without one (refused when ' +
        `NODE_ENV is production); got ${describe(guards)}`,
    );
  }
  if (imports !== undefined && !Array.isArray(imports)) {
    fail(`imports must be an array of modules, got ${describe(imports)}`);
  }
  if (keyPrefix !== undefined && typeof keyPrefix !== 'string') {
    fail(`keyPrefix must be a string, got ${describe(keyPrefix)}`);
  }
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 500) {
    fail(`pageSize must be a whole number from 1 to 500, got ${describe(pageSize)}`);
  }
  const trimmed = path!.replace(/^\/+|\/+$/g, '');
  return { path: `/${trimmed}`, guards: guards || [], keyPrefix, pageSize };
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : 'an array';
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
