import { IdempotentSqsMessage, type IdempotencyModuleOptions } from '../../lib';
import {
  checkMethodOptions,
  checkStepOptions,
  DEFAULT_OPTIONS,
  FACTORY_OPTION_NAMES,
  METHOD_OPTION_NAMES,
  mergeOptions,
  NESTED_OPTION_NAMES,
  type OptionNames,
  ROUTE_OPTION_NAMES,
  STEP_OPTION_NAMES,
  resolveModuleOptions,
  resolveRouteOptions,
  resolveRunOptions,
} from '../../lib/options';

/**
 * Every options object is read as its own properties (and, for an instance of a config class,
 * its class's), never through `Object.prototype`: a name a vulnerable deep merge elsewhere in
 * the app left there must not become an option of the module, a route, run() or a nested
 * object, nor of what they resolve to, spread copies included.
 */
const POLLUTION: Record<string, unknown> = {
  // Route, run() and module options.
  scope: 'public',
  keySpace: 'shared',
  key: 'not a function',
  onReplay: 'not a function',
  fingerprint: 'polluted',
  redis: 'redis://127.0.0.1:1',
  store: { polluted: true },
  keyDerivationSecret: 'polluted',
  onEvent: 'not a function',
  // Nested: transactional, compression, problemDetails, localReplayCache.
  connectionName: 'other-database',
  level: 99,
  typeBaseUri: 'https://attacker.example/',
  maxEntries: 1,
};

beforeEach(() => {
  for (const [name, value] of Object.entries(POLLUTION)) {
    Object.defineProperty(Object.prototype, name, {
      value,
      enumerable: true,
      configurable: true,
      writable: true,
    });
  }
});

afterEach(() => {
  for (const name of Object.keys(POLLUTION)) {
    delete (Object.prototype as Record<string, unknown>)[name];
  }
});

/**
 * The names of `names` whose value `options` reads from the polluted prototype. (A name an
 * object does not take, `redis` on a route's options, is not read on it.)
 */
function polluted(options: object, names: OptionNames | readonly string[]): string[] {
  const known = 'known' in names ? names.known : names;
  return known.filter(
    (name) =>
      Object.hasOwn(POLLUTION, name) &&
      (options as Record<string, unknown>)[name] === POLLUTION[name],
  );
}

const MODULE = FACTORY_OPTION_NAMES;
const LOCAL_REPLAY_CACHE = ['maxEntries', 'maxBytes', 'ttl'];

describe('options read as own properties, with Object.prototype polluted', () => {
  it('route options: @Idempotent({})', () => {
    const route = resolveRouteOptions({}, '@Idempotent()');
    expect(polluted(route, ROUTE_OPTION_NAMES)).toEqual([]);
    expect(polluted({ ...route }, ROUTE_OPTION_NAMES)).toEqual([]);
  });

  it('module options: forRoot({}) and what a forRootAsync() factory returns', () => {
    const module = resolveModuleOptions({});
    expect(polluted(module, MODULE)).toEqual([]);
    // The service spreads the module's options under run()'s: the copy reads nothing more.
    expect(polluted({ ...module, onConflict: 'wait' }, MODULE)).toEqual([]);
  });

  it('a route merged over the module, and every nested object', () => {
    const module = resolveModuleOptions({
      transactional: {},
      compression: {},
      localReplayCache: {},
    } as IdempotencyModuleOptions);
    expect(module.localReplayCache).toEqual({ maxEntries: 1_000, maxBytes: 16 << 20, ttl: 10_000 });
    const problemDetails = { typeBaseUri: 'https://example.com/' };
    const route = mergeOptions(module, resolveRouteOptions({ problemDetails }, '@Idempotent()'));
    expect(polluted(route, MODULE)).toEqual([]);
    const { transactional, compression } = NESTED_OPTION_NAMES;
    expect(polluted(route.transactional as object, transactional)).toEqual([]);
    expect(polluted(route.compression as object, compression)).toEqual([]);
    expect(route.problemDetails).toEqual(problemDetails);
    const defaults = mergeOptions(DEFAULT_OPTIONS);
    expect(polluted(defaults, MODULE)).toEqual([]);
    expect(polluted(defaults.compression as object, compression)).toEqual([]);
  });

  it('nested objects as given: transactional, problemDetails, localReplayCache', () => {
    const module = resolveModuleOptions({
      problemDetails: { typeBaseUri: 'https://example.com/' },
      localReplayCache: { ttl: '5s' },
    } as IdempotencyModuleOptions);
    expect(module.localReplayCache).toEqual({ maxEntries: 1_000, maxBytes: 16 << 20, ttl: 5_000 });
    expect(polluted(module.localReplayCache as object, LOCAL_REPLAY_CACHE)).toEqual([]);
    const route = resolveRouteOptions({ transactional: {} }, '@Idempotent()');
    expect(polluted(route.transactional as object, NESTED_OPTION_NAMES.transactional)).toEqual([]);
  });

  it("run()'s options: the scope is 'default', nothing is overridden", () => {
    const run = resolveRunOptions({}, 'IdempotencyService.run');
    expect(run.scope).toBe('default');
    expect(run.fingerprint).toBeUndefined();
    expect(run.overrides).toEqual({});
    const { overrides } = resolveRunOptions({ transactional: {} }, 'IdempotencyService.run');
    expect(Object.keys(overrides)).toEqual(['transactional']);
    expect(polluted(overrides.transactional as object, ['connectionName'])).toEqual([]);
  });

  it("run()'s usual options (a scope, a fingerprint, or none), read without the full copy, alike", () => {
    const where = 'IdempotencyService.run';
    for (const given of [undefined, {}, { scope: undefined }]) {
      expect(resolveRunOptions(given, where)).toEqual({
        scope: 'default',
        fingerprint: undefined,
        overrides: {},
      });
    }
    const fingerprint = { amount: 3 };
    expect(resolveRunOptions({ scope: 'orders', fingerprint }, where)).toEqual({
      scope: 'orders',
      fingerprint,
      overrides: {},
    });
    // What the usual path leaves to the full one: refused, or read, as before.
    expect(() => resolveRunOptions({ scope: '' }, where)).toThrow(
      'IdempotencyService.run: scope must be a non-empty string',
    );
    expect(() => resolveRunOptions({ scpoe: 'orders' }, where)).toThrow(/did you mean `scope`/);
    expect(resolveRunOptions({ scope: 'orders', lockTtl: '5s' }, where).overrides).toEqual({
      lockTtl: 5_000,
    });
    class Defaults {
      get scope() {
        return 'from-a-getter';
      }
    }
    expect(resolveRunOptions(new Defaults(), where).scope).toBe('from-a-getter');
    const hidden = Object.defineProperty({}, 'scope', { value: 'orders', enumerable: false });
    expect(resolveRunOptions(hidden, where).scope).toBe('orders');
    const hiddenTtl = Object.defineProperty({ scope: 'orders' }, 'lockTtl', { value: '5s' });
    expect(resolveRunOptions(hiddenTtl, where).overrides).toEqual({ lockTtl: 5_000 });
  });

  it("@IdempotentMethod()'s and step()'s options", () => {
    expect(polluted(checkMethodOptions({ key: () => 'k' }), METHOD_OPTION_NAMES)).toEqual([]);
    expect(polluted(checkStepOptions({}, 'step'), STEP_OPTION_NAMES)).toEqual([]);
  });

  it("@IdempotentSqsMessage()'s options: the scope is Class.method", () => {
    class Payments {
      async charge(): Promise<void> {}
    }
    const descriptor = Object.getOwnPropertyDescriptor(Payments.prototype, 'charge')!;
    IdempotentSqsMessage()(Payments.prototype, 'charge', descriptor);
    const charge = descriptor.value as (message: object) => Promise<void>;
    // Called on an instance Nest did not create: the error names the scope in force.
    return expect(charge.call({}, { MessageId: 'm1' })).rejects.toThrow(
      /^@IdempotentSqsMessage\(\): Payments\.charge was called/,
    );
  });

  it("still reads a config class's getters, never Object.prototype's names", () => {
    class Config {
      get ttl(): number {
        return 60_000;
      }
    }
    const module = resolveModuleOptions(new Config() as IdempotencyModuleOptions);
    expect(module.ttl).toBe(60_000);
    expect(polluted(module, MODULE)).toEqual([]);
  });
});
