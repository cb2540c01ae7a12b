import type { ConfigurableModuleAsyncOptions } from '@nestjs/common';
import type {
  IdempotencyCompressionOptions,
  IdempotencyOptions,
} from '../interfaces/idempotency-options.interface';
import type {
  IdempotencyEncryptionOptions,
  IdempotencyLocalReplayCacheOptions,
  IdempotencyModuleExtras,
  IdempotencyModuleOptions,
} from '../interfaces/idempotency-module-options.interface';
import type {
  IdempotencyRunOptions,
  IdempotencyStepOptions,
  IdempotentMethodOptions,
} from '../interfaces/idempotency-run-options.interface';
import { unknownOptionProblem } from './option-names';

/**
 * The names of `T`, from an object that must name each of them once: the compiler refuses a
 * missing name and an extra one, so adding an option to an interface without adding it here
 * fails the build instead of refusing the new option at boot.
 */
export function namesOf<T>(names: Record<keyof T, unknown>): string[] {
  return Object.keys(names);
}

/** Where each kind of option goes, as `unknownOptionProblem` completes "set it in ...". */
const FOR_ROOT = 'IdempotencyModule.forRoot()';
const RUN_FROM_MODULE = "IdempotencyModule.forRoot() (run() takes the module's)";
const ASYNC_OWN = "IdempotencyModule.forRootAsync()'s own options, beside useFactory";
const FACTORY = 'what the forRootAsync() factory returns';
const ROUTE = '@Idempotent() on a route (run() has no request)';

/** Options of `@Idempotent()`: the route options. */
const ROUTE_NAMES = namesOf<IdempotencyOptions>({
  enabled: true,
  headerName: true,
  ttl: true,
  lockTtl: true,
  maxLockHold: true,
  required: true,
  fingerprint: true,
  failOpen: true,
  key: true,
  keySpace: true,
  scope: true,
  onReplay: true,
  onReject: true,
  storeErrors: true,
  transactional: true,
  statusHeader: true,
  replayHeaders: true,
  maxResponseBytes: true,
  maxKeyLength: true,
  keyPrefix: true,
  storeTimeout: true,
  onConflict: true,
  waitTimeout: true,
  compression: true,
  problemDetails: true,
  propagateKeys: true,
  resumable: true,
});

/** Options only the module takes: the store, listeners, secrets. */
const MODULE_ONLY_NAMES = namesOf<Omit<IdempotencyModuleOptions, keyof IdempotencyOptions>>({
  redis: true,
  postgres: true,
  mysql: true,
  store: true,
  encryption: true,
  allowInMemoryStorage: true,
  onEvent: true,
  metrics: true,
  keyDerivationSecret: true,
  localReplayCache: true,
  abandonedAfter: true,
});

/** What shapes the module itself, in `forRoot()` and beside `forRootAsync()`'s factory. */
const EXTRA_NAMES = namesOf<IdempotencyModuleExtras>({ isGlobal: true, globalInterceptor: 1 });

/** `forRootAsync()`'s own names, besides the extras. */
const ASYNC_NAMES = namesOf<
  ConfigurableModuleAsyncOptions<IdempotencyModuleOptions, 'createIdempotencyOptions'>
>({
  imports: true,
  useExisting: true,
  useClass: true,
  useFactory: true,
  inject: true,
  provideInjectionTokensFrom: true,
});

/** Options of `IdempotencyService.run()`. */
const RUN_NAMES = namesOf<IdempotencyRunOptions>({
  scope: true,
  fingerprint: true,
  onConflict: true,
  waitTimeout: true,
  lockTtl: true,
  ttl: true,
  storeErrors: true,
  transactional: true,
  resumable: true,
});

/**
 * Where each route option run() does not take goes: the module's options for those run() reads
 * from them, `@Idempotent()` for those only a request has a use for. Typed over every such name,
 * so a new route option must be placed here.
 */
const RUN_ELSEWHERE: Record<
  Exclude<keyof IdempotencyOptions, keyof IdempotencyRunOptions>,
  string
> = {
  maxLockHold: RUN_FROM_MODULE,
  maxResponseBytes: RUN_FROM_MODULE,
  maxKeyLength: RUN_FROM_MODULE,
  keyPrefix: RUN_FROM_MODULE,
  storeTimeout: RUN_FROM_MODULE,
  compression: RUN_FROM_MODULE,
  propagateKeys: RUN_FROM_MODULE,
  enabled: ROUTE,
  headerName: ROUTE,
  required: ROUTE,
  failOpen: ROUTE,
  key: "run()'s first argument: run(key, fn, options)",
  keySpace: ROUTE,
  onReplay: ROUTE,
  onReject: ROUTE,
  statusHeader: ROUTE,
  replayHeaders: ROUTE,
  problemDetails: ROUTE,
};

const placed = (names: readonly string[], place: string): Record<string, string> =>
  Object.fromEntries(names.map((name) => [name, place]));

/**
 * The names each place takes (`known`) and the names that belong at another level with where
 * they go (`elsewhere`), as {@link unknownOptionProblem} takes them.
 */
export interface OptionNames {
  readonly known: readonly string[];
  readonly elsewhere: Readonly<Record<string, string>>;
}

/** `@Idempotent({...})`. */
export const ROUTE_OPTION_NAMES: OptionNames = {
  known: ROUTE_NAMES,
  elsewhere: placed([...MODULE_ONLY_NAMES, ...EXTRA_NAMES], FOR_ROOT),
};

/** What the operator page takes: a module of its own, with its path fixed when it is imported. */
const OPERATOR_PAGE = {
  operatorPage: 'IdempotencyOperatorPageModule.register({ path, guards }) (docs/operators.md)',
};

/** `IdempotencyModule.forRoot({...})`: the module options and the extras. */
export const ROOT_OPTION_NAMES: OptionNames = {
  known: [...ROUTE_NAMES, ...MODULE_ONLY_NAMES, ...EXTRA_NAMES],
  elsewhere: { ...placed(ASYNC_NAMES, 'IdempotencyModule.forRootAsync()'), ...OPERATOR_PAGE },
};

/** What a `forRootAsync()` factory (or `useClass` / `useExisting`) returns: the module options. */
export const FACTORY_OPTION_NAMES: OptionNames = {
  known: [...ROUTE_NAMES, ...MODULE_ONLY_NAMES],
  elsewhere: { ...placed([...EXTRA_NAMES, ...ASYNC_NAMES], ASYNC_OWN), ...OPERATOR_PAGE },
};

/** `IdempotencyModule.forRootAsync({...})` itself. */
export const ASYNC_OPTION_NAMES: OptionNames = {
  known: [...ASYNC_NAMES, ...EXTRA_NAMES],
  elsewhere: placed([...ROUTE_NAMES, ...MODULE_ONLY_NAMES], FACTORY),
};

/** `IdempotencyService.run(key, fn, {...})`. */
export const RUN_OPTION_NAMES: OptionNames = {
  known: RUN_NAMES,
  elsewhere: {
    ...RUN_ELSEWHERE,
    ...placed([...MODULE_ONLY_NAMES, ...EXTRA_NAMES], FOR_ROOT),
  },
};

/** `@IdempotentMethod({...})`: run()'s names, and the `key` function. */
export const METHOD_OPTION_NAMES: OptionNames = {
  known: namesOf<IdempotentMethodOptions<unknown[]>>({
    key: true,
    scope: true,
    fingerprint: true,
    onConflict: true,
    waitTimeout: true,
    lockTtl: true,
    ttl: true,
    storeErrors: true,
    transactional: true,
    resumable: true,
  }),
  elsewhere: RUN_OPTION_NAMES.elsewhere,
};

/** The module option `localReplayCache: {...}`. */
export const LOCAL_REPLAY_CACHE_OPTION_NAMES: OptionNames = {
  known: namesOf<IdempotencyLocalReplayCacheOptions>({
    maxEntries: true,
    maxBytes: true,
    ttl: true,
  }),
  elsewhere: {},
};

/** The names of the options that take an object of their own, by option. */
export const NESTED_OPTION_NAMES = {
  transactional: namesOf<Exclude<IdempotencyOptions['transactional'], boolean | undefined>>({
    connectionName: true,
  }),
  compression: namesOf<IdempotencyCompressionOptions>({
    algorithm: true,
    threshold: true,
    level: true,
  }),
  problemDetails: namesOf<Exclude<IdempotencyOptions['problemDetails'], boolean | undefined>>({
    typeBaseUri: true,
  }),
  encryption: namesOf<IdempotencyEncryptionOptions>({ keys: true }),
} as const;

/**
 * Why an option's object (`name`: `transactional`, `compression`...) holds a name it does not
 * take, or undefined: `transactional: unknown option \`connection\` (did you mean ...)`.
 */
export function nestedNamesProblem(
  name: keyof typeof NESTED_OPTION_NAMES,
  value: unknown,
): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const problem = unknownOptionProblem(value, NESTED_OPTION_NAMES[name]);
  return problem && `${name}: ${problem}`;
}

/** `IdempotencyService.step(name, fn, {...})`: the rest is the route's or run()'s. */
export const STEP_OPTION_NAMES: OptionNames = {
  known: namesOf<IdempotencyStepOptions>({ transactional: true }),
  elsewhere: placed(
    ROUTE_NAMES.filter((name) => name !== 'transactional'),
    '@Idempotent() or run() (a step takes the rest from them)',
  ),
};

/**
 * Throws a TypeError (`<where>: unknown option ...`) unless every own name of `given` is one
 * `names` takes: a misspelt or misplaced option fails where it was set, never ignored.
 */
export function assertKnownNames(given: object, names: OptionNames, where: string): void {
  const problem = unknownOptionProblem(given, names.known, names.elsewhere);
  if (problem) throw new TypeError(`${where}: ${problem}`);
}
