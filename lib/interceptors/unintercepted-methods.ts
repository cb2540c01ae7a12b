import { Logger } from '@nestjs/common';
import { MetadataScanner, type ModulesContainer, type Reflector } from '@nestjs/core';
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
 * `@Idempotent()` there reaches the interceptor, which warns at the first message when it does
 * not support the context type (or handles it, through a subclass's getAdapter()).
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
 * neither a route, a message or event pattern nor a gRPC method. Provider methods of frameworks
 * that do run interceptors on them (see {@link INTERCEPTED_HANDLER_KEYS}) are left alone. An app
 * whose own subclass of the interceptor overrides getAdapter() may support contexts this package
 * does not know: it gets a warning instead of the refusal.
 *
 * @throws Error naming the class and method, and what to use instead
 */
export function refuseUninterceptedMethods(modules: ModulesContainer, reflector: Reflector): void {
  const problems: string[] = [];
  const seen = new Set<object>();
  const scanner = new MetadataScanner();
  for (const module of modules.values()) {
    for (const { metatype } of module.controllers.values()) {
      if (typeof metatype !== 'function' || seen.has(metatype)) continue;
      seen.add(metatype);
      for (const [name, handler] of methods(scanner, metatype)) {
        if (!marked(reflector, handler) || isHandler(handler) || isInterceptedElsewhere(handler)) {
          continue;
        }
        problems.push(
          `@Idempotent() on ${metatype.name}.${name} does nothing: it is not a route, a message ` +
            'or event pattern, nor a gRPC method, so Nest never runs it through an interceptor.',
        );
      }
    }
    for (const { metatype } of module.providers.values()) {
      if (typeof metatype !== 'function' || !metatype.prototype || seen.has(metatype)) continue;
      seen.add(metatype);
      problems.push(...providerProblems(reflector, scanner, metatype as ClassLike));
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
  prototype: Record<string, unknown>;
}

function providerProblems(
  reflector: Reflector,
  scanner: MetadataScanner,
  metatype: ClassLike,
): string[] {
  const handlers = methods(scanner, metatype);
  const isResolver = handlers.some(([, handler]) => isResolverMethod(handler));
  if (handlers.some(([, handler]) => isInterceptedElsewhere(handler))) return [];
  const problems: string[] = [];
  const where = isResolver
    ? 'is not a query, mutation, subscription or field of the resolver'
    : `is a method of a provider: Nest calls it directly, without interceptors (a BullMQ ` +
      'processor, an @OnEvent listener, a @Cron method, an @SqsMessageHandler...)';
  if (!isResolver && marked(reflector, metatype)) {
    problems.push(
      `@Idempotent() on ${metatype.name} does nothing: it is a provider, not a controller or a ` +
        'GraphQL resolver, and Nest calls its methods directly, without interceptors.',
    );
  }
  for (const [name, handler] of handlers) {
    if (!marked(reflector, handler)) continue;
    if (!isResolverMethod(handler)) {
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

/** The methods of a class (inherited ones too) by name. */
function methods(scanner: MetadataScanner, metatype: ClassLike): [string, object][] {
  return scanner
    .getAllMethodNames(metatype.prototype)
    .map((name): [string, unknown] => [name, metatype.prototype[name]])
    .filter((entry): entry is [string, object] => typeof entry[1] === 'function');
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
