import { Logger } from '@nestjs/common';
import type { ModulesContainer, Reflector } from '@nestjs/core';
import { IdempotentOptions } from '../decorators/idempotent-options.metadata';
import {
  MESSAGE_MAPPING_METADATA,
  PATH_METADATA,
  PATTERN_METADATA,
  RESOLVER_PROPERTY_METADATA,
  RESOLVER_REFERENCE_METADATA,
  RESOLVER_TYPE_METADATA,
} from '../utils/nest-metadata';
import { IdempotencyInterceptor } from './idempotency.interceptor';

/**
 * The handler metadata of frameworks that run a provider's methods through Nest's interceptors
 * (ExternalContextCreator): `@SubscribeMessage()` of @nestjs/websockets, and the
 * `RABBIT_HANDLER` symbol of @golevelup/nestjs-rabbitmq's `@RabbitSubscribe()` / `@RabbitRPC()`.
 * `@Idempotent()` there reaches the interceptor, which serves both (context types `ws` and
 * `rmq`; what it cannot serve on them is refused by the route checks).
 */
const INTERCEPTED_HANDLER_KEYS = [MESSAGE_MAPPING_METADATA];
const INTERCEPTED_HANDLER_SYMBOLS = ['RABBIT_HANDLER'];

/** What tells a GraphQL resolver's method apart: a query, mutation, subscription or field. */
const RESOLVER_METHOD_KEYS = [
  RESOLVER_TYPE_METADATA,
  RESOLVER_PROPERTY_METADATA,
  RESOLVER_REFERENCE_METADATA,
];

/** Resolver types @Idempotent() acts on, or refuses on its own (a subscription, in route checks). */
const MADE_IDEMPOTENT: unknown[] = ['Mutation', 'Subscription'];

const USE_INSTEAD =
  'Use @IdempotentMethod({ key }) on the method or IdempotencyService.run() inside it (for an ' +
  '@SqsMessageHandler, @IdempotentSqsMessage()): see docs/consumers.md.';

/**
 * Refuses at boot `@Idempotent()` where Nest never runs an interceptor, so it would do nothing:
 * on a method of a provider that is not a GraphQL resolver's (a BullMQ processor, an `@OnEvent`
 * listener, a `@Cron` method, an `@SqsMessageHandler`: their frameworks call the method
 * directly), on a provider class that is not a resolver, and on a controller method that is
 * neither a route, a message or event pattern nor a gRPC method, and on a method named by a
 * symbol. A provider built by `useFactory` or `useValue` is checked as its instance's class; a
 * class that is a controller in any module, as a controller. The methods of frameworks that do
 * run interceptors on them (see {@link INTERCEPTED_HANDLER_KEYS}) are left alone, and only
 * those: the other methods of their class are checked as any provider's. An app
 * whose own subclass of the interceptor overrides getAdapter() may support contexts this package
 * does not know: it gets a warning instead of the refusal.
 *
 * @throws Error naming the class and method, and what to use instead
 */
export function refuseUninterceptedMethods(modules: ModulesContainer, reflector: Reflector): void {
  const problems: string[] = [];
  // A class that is a controller anywhere is checked as one, even where a module scanned
  // before lists it as a provider.
  const controllers = new Set<ClassLike>();
  for (const module of modules.values()) {
    for (const wrapper of module.controllers.values()) {
      const type = classOf(wrapper);
      if (type) controllers.add(type);
    }
  }
  for (const metatype of controllers) {
    for (const [name, handler] of methods(metatype)) {
      if (!marked(reflector, handler) || isInterceptedElsewhere(handler)) continue;
      if (typeof name === 'symbol') problems.push(symbolProblem(metatype, name));
      else if (!isHandler(handler)) {
        problems.push(
          `@Idempotent() on ${metatype.name}.${name} does nothing: it is not a route, a message ` +
            'or event pattern, nor a gRPC method, so Nest never runs it through an interceptor.',
        );
      }
    }
  }
  const seen = new Set<ClassLike>(controllers);
  for (const module of modules.values()) {
    for (const wrapper of module.providers.values()) {
      const type = classOf(wrapper);
      if (!type || seen.has(type)) continue;
      seen.add(type);
      problems.push(...providerProblems(reflector, type));
    }
  }
  if (problems.length === 0) return;
  const adapter = customAdapter(modules);
  const text = `IdempotencyModule: ${problems.join('\n')}\n${USE_INSTEAD}`;
  if (!adapter) throw new Error(text);
  new Logger('Idempotency').warn(
    `${text}\n(A warning, not a refusal: ${adapter} overrides getAdapter(), and may support ` +
      'these methods if a framework runs interceptors on them.)',
  );
}

interface ClassLike {
  name: string;
  prototype: object;
}

/** What is read of Nest's InstanceWrapper (a provider or controller of a module). */
interface Wrapper {
  metatype: unknown;
  instance: unknown;
  /** A provider built by `useFactory` (its metatype is the factory) or `useValue` (none). */
  isNotMetatype: boolean;
}

/**
 * The class whose methods a provider or controller has: its metatype for a class provider; for
 * one built by `useFactory` (whose metatype is the factory) or `useValue` (none), the class of
 * the instance Nest holds, as it is by the time modules are initialised.
 */
function classOf({ metatype, instance, isNotMetatype }: Wrapper): ClassLike | undefined {
  const type: unknown = !isNotMetatype
    ? metatype
    : typeof instance === 'object' && instance !== null
      ? instance.constructor
      : undefined;
  if (typeof type !== 'function' || type === Object) return undefined;
  const { prototype } = type as { prototype?: unknown };
  return typeof prototype === 'object' && prototype !== null ? (type as ClassLike) : undefined;
}

function providerProblems(reflector: Reflector, metatype: ClassLike): string[] {
  const handlers = methods(metatype);
  const isResolver = handlers.some(([, handler]) => isResolverMethod(handler));
  // Those methods run through interceptors; the class's others are checked as any provider's.
  const intercepted = handlers.some(([, handler]) => isInterceptedElsewhere(handler));
  const problems: string[] = [];
  const where = isResolver
    ? 'is not a query, mutation, subscription or field of the resolver'
    : `is a method of a provider: Nest calls it directly, without interceptors (a BullMQ ` +
      'processor, an @OnEvent listener, a @Cron method, an @SqsMessageHandler...)';
  if (!isResolver && !intercepted && marked(reflector, metatype)) {
    problems.push(
      `@Idempotent() on ${metatype.name} does nothing: it is a provider, not a controller or a ` +
        'GraphQL resolver, and Nest calls its methods directly, without interceptors.',
    );
  }
  for (const [name, handler] of handlers) {
    if (!marked(reflector, handler) || isInterceptedElsewhere(handler)) continue;
    if (typeof name === 'symbol') {
      problems.push(symbolProblem(metatype, name));
    } else if (!isResolverMethod(handler)) {
      problems.push(`@Idempotent() on ${metatype.name}.${name} does nothing: it ${where}.`);
    } else if (!MADE_IDEMPOTENT.includes(Reflect.getMetadata(RESOLVER_TYPE_METADATA, handler))) {
      // A query or field resolver: passed untouched (a subscription is refused on its own).
      problems.push(
        `@Idempotent() on ${metatype.name}.${name} does nothing: it is a GraphQL query or field ` +
          'resolver, and @Idempotent() makes mutations idempotent (a read has no effect to run ' +
          'once). Remove it, or put it on the mutation.',
      );
    }
  }
  return problems;
}

/** Nest (routes, patterns, resolvers, gateways) finds handlers by their string names only. */
function symbolProblem(metatype: ClassLike, name: symbol): string {
  return (
    `@Idempotent() on ${metatype.name}[${String(name)}] does nothing: it is named by a symbol, ` +
    'and Nest finds routes, patterns and resolvers by their string names only, so it never runs ' +
    'it through an interceptor.'
  );
}

/**
 * The methods of a class, inherited ones too, by name, symbols included (MetadataScanner lists
 * string names only, so a method named by a symbol went unchecked); accessors are not read.
 */
function methods(metatype: ClassLike): [string | symbol, object][] {
  const found = new Map<string | symbol, object>();
  for (
    let prototype: object | null = metatype.prototype;
    prototype && prototype !== Object.prototype;
    prototype = Reflect.getPrototypeOf(prototype)
  ) {
    for (const name of Reflect.ownKeys(prototype)) {
      if (name === 'constructor' || found.has(name)) continue;
      const { value } = Reflect.getOwnPropertyDescriptor(prototype, name) ?? {};
      if (typeof value === 'function') found.set(name, value as object);
    }
  }
  return [...found];
}

/** `@Idempotent()` (not `@Idempotent(false)`) on a class or a method. */
function marked(reflector: Reflector, target: object): boolean {
  const options = reflector.get(IdempotentOptions, target as never);
  return options !== undefined && options.enabled !== false;
}

/** A controller method Nest intercepts: a route, a message or event pattern, a gRPC method. */
function isHandler(handler: object): boolean {
  return (
    Reflect.hasMetadata(PATH_METADATA, handler) || Reflect.hasMetadata(PATTERN_METADATA, handler)
  );
}

function isResolverMethod(handler: object): boolean {
  return RESOLVER_METHOD_KEYS.some((key) => Reflect.hasMetadata(key, handler));
}

function isInterceptedElsewhere(handler: object): boolean {
  return Reflect.getMetadataKeys(handler).some((key: unknown) =>
    typeof key === 'symbol'
      ? INTERCEPTED_HANDLER_SYMBOLS.includes(key.description ?? '')
      : INTERCEPTED_HANDLER_KEYS.includes(key as string),
  );
}

/**
 * The name of a subclass of the interceptor that overrides getAdapter(), registered in the app
 * (as a provider, `APP_INTERCEPTOR` included, or bound with `@UseInterceptors()`, which Nest
 * registers as an injectable of the module), if any.
 */
function customAdapter(modules: ModulesContainer): string | undefined {
  const adapterOf = (prototype: object) => (prototype as { getAdapter?: unknown }).getAdapter;
  const base = adapterOf(IdempotencyInterceptor.prototype);
  for (const module of modules.values()) {
    for (const { metatype } of [...module.providers.values(), ...module.injectables.values()]) {
      if (
        typeof metatype === 'function' &&
        metatype.prototype instanceof IdempotencyInterceptor &&
        adapterOf(metatype.prototype as object) !== base
      ) {
        return metatype.name;
      }
    }
  }
  return undefined;
}
