import {
  LOCAL_REPLAY_CACHE_OPTION_NAMES,
  NESTED_OPTION_NAMES,
  type OptionNames,
  ROOT_OPTION_NAMES,
} from './known-names';

/** The options that take an object of their own, with the names that object takes. */
const NESTED: Readonly<Record<string, OptionNames>> = {
  ...Object.fromEntries(
    Object.entries(NESTED_OPTION_NAMES).map(([name, known]) => [name, { known, elsewhere: {} }]),
  ),
  localReplayCache: LOCAL_REPLAY_CACHE_OPTION_NAMES,
};

/**
 * The options `given` holds, as a new plain object: its own enumerable names, and for an
 * instance of a class (a config class whose getters read the environment, an object built on a
 * prototype of defaults) every name of `names.known` its prototypes answer to, getters read on
 * `given`. Never a name `Object.prototype` answers to: a vulnerable deep merge elsewhere in the
 * app (`merge({}, JSON.parse('{"__proto__": {"scope": "public"}}'))`) leaves names there that
 * every object answers to, and read as options they replayed one user's response to another.
 * An option that takes an object (`transactional`, `compression`, `problemDetails`,
 * `encryption`, `localReplayCache`) is read the same way, by {@link ownOptions}.
 *
 * Names `given` does not hold are left out: what `forRoot()` hands to Nest, whose defaults of
 * `isGlobal` an `undefined` would replace. Everything that reads options reads an
 * {@link ownOptions} copy.
 */
export function plainOptions<T extends object>(
  given: T,
  names: OptionNames = ROOT_OPTION_NAMES,
): T {
  const plain: Record<string, unknown> = {};
  for (const name of names.known) {
    const holder = holderOf(given, name);
    if (holder) plain[name] = Reflect.get(holder, name, given);
  }
  // Names it may not take: kept, for the name check to refuse.
  for (const [name, value] of Object.entries(given)) {
    if (!Object.hasOwn(plain, name)) plain[name] = value;
  }
  for (const [name, nested] of Object.entries(NESTED)) {
    const value = plain[name];
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      plain[name] = ownOptions(value, nested);
    }
  }
  return plain as T;
}

/**
 * The options `given` holds (see {@link plainOptions}), with every name of `names.known` an own
 * property, `undefined` when not set: a read of the copy, or of a spread of it (the service
 * spreads run()'s options over the module's), never reaches `Object.prototype`. The one place
 * where an options object is read: module options, a forRootAsync() factory's result, route,
 * run(), method, step and SQS options, their nested objects, and merged options.
 */
export function ownOptions<T extends object>(given: T, names: OptionNames): T {
  const own = plainOptions(given, names) as Record<string, unknown>;
  for (const name of names.known) if (!Object.hasOwn(own, name)) own[name] = undefined;
  return own as T;
}

/** `given` itself or the prototype below `Object.prototype` that holds `name`, if any. */
function holderOf(given: object, name: string): object | undefined {
  for (let holder: object | null = given; holder && holder !== Object.prototype;) {
    if (Object.hasOwn(holder, name)) return holder;
    holder = Reflect.getPrototypeOf(holder);
  }
  return undefined;
}
