import { MetadataScanner, type ModulesContainer } from '@nestjs/core';
import {
  INTERCEPTORS_METADATA,
  isGatewayHandler,
  rabbitHandler,
  RESOLVER_TYPE_METADATA,
} from '../utils/nest-metadata';
import { claimPoint, readsBody } from './body-readers';

/**
 * Makes `interceptor` (bound by `@Idempotent()`) the outermost of the controller- and method-level
 * interceptors of every route it is bound to, whatever the decorator order: a replay must run
 * none of them (they would set their headers, cookies or status again), and what they add to a
 * first response is part of what is stored. Global interceptors stay outside, as Nest runs them.
 *
 * Nest runs a route's interceptors as global, then the controller's (`__interceptors__` on the
 * class), then the method's, each in the order the decorators appended them. So:
 * - a controller with interceptors of its own (or `@Idempotent()` on the class): the interceptor
 *   goes first on the class. Its other routes then pass through it too; they already pay Nest's
 *   interceptor pipeline, and it steps aside on them at once. Its methods keep their binding
 *   (a method may be inherited by another controller, which needs it): on this controller the
 *   inner one sees the request already handled and steps aside;
 * - otherwise it goes first on each method that binds it.
 *
 * Interceptors that read the body (multer's `FileInterceptor`, `FilesInterceptor`... of
 * `@nestjs/platform-express`) come right after it, followed by the claim point: a multipart
 * request met with its body unread is claimed there, once parsed, so that its fingerprint covers
 * the fields and files the client sent (see `claimPoint`). Every other interceptor of the route
 * comes after the claim point; a replay runs the readers (it parses the upload again) but none
 * of them.
 *
 * It rewrites metadata, so it must run before Nest reads it: during instance loading (the
 * module's constructor), which comes before routes and message handlers are registered.
 */
export function hoistInterceptor(
  modules: ModulesContainer,
  interceptor: abstract new (...args: never[]) => object,
): void {
  // The interceptor, a subclass of it or an instance of either (a subclass bound by the user).
  const isIt = (bound: unknown) =>
    bound === interceptor ||
    (typeof bound === 'function' && bound.prototype instanceof interceptor) ||
    bound instanceof interceptor;
  // `own` first, then the body readers and the claim point after them, then the others.
  const ordered = (own: unknown[], bound: unknown[]) => {
    const readers = bound.filter(readsBody);
    const others = bound.filter((b) => !isIt(b) && !readsBody(b) && b !== claimPoint);
    return [...own, ...readers, ...(readers.length > 0 ? [claimPoint] : []), ...others];
  };
  // Its bindings first (the class's own, else the interceptor itself).
  const first = (bound: unknown[]) => {
    const own = bound.filter(isIt);
    return ordered(own.length > 0 ? own : [interceptor], bound);
  };
  for (const { metatype, handlers } of controllers(modules)) {
    const onClass = bindings(metatype);
    const onMethods = handlers.filter((handler) => bindings(handler).some(isIt));
    if (onClass.some(isIt) || (onClass.length > 0 && onMethods.length > 0)) {
      Reflect.defineMetadata(INTERCEPTORS_METADATA, first(onClass), metatype);
      for (const handler of handlers) {
        const bound = bindings(handler);
        if (!bound.some(readsBody)) continue;
        Reflect.defineMetadata(INTERCEPTORS_METADATA, ordered(bound.filter(isIt), bound), handler);
      }
    } else {
      for (const handler of onMethods) {
        Reflect.defineMetadata(INTERCEPTORS_METADATA, first(bindings(handler)), handler);
      }
    }
  }
}

/**
 * Every controller class of the app, and every provider whose methods Nest runs through
 * interceptors: a GraphQL resolver (`@Query()`, `@Mutation()`, `@Subscription()`), a WebSocket
 * gateway (`@SubscribeMessage()`), a golevelup RabbitMQ handler class (`@RabbitSubscribe()`,
 * `@RabbitRPC()`); with its handler functions and module.
 */
export function* controllers(
  modules: ModulesContainer,
): Generator<{ module: { name: string }; metatype: object; handlers: object[] }> {
  const scanner = new MetadataScanner();
  const methods = (metatype: { prototype: Record<string, unknown> }) =>
    scanner
      .getAllMethodNames(metatype.prototype)
      .map((name) => metatype.prototype[name])
      .filter((handler): handler is object => typeof handler === 'function');
  for (const module of modules.values()) {
    for (const { metatype } of module.controllers.values()) {
      if (typeof metatype !== 'function') continue;
      yield { module, metatype, handlers: methods(metatype) };
    }
    for (const { metatype } of module.providers.values()) {
      if (typeof metatype !== 'function' || !metatype.prototype) continue;
      const handlers = methods(metatype);
      if (handlers.some(isInterceptedHandler)) {
        yield { module, metatype, handlers };
      }
    }
  }
}

function bindings(target: object): unknown[] {
  return (Reflect.getMetadata(INTERCEPTORS_METADATA, target) as unknown[] | undefined) ?? [];
}

/** A provider's method Nest runs through interceptors (see {@link controllers}). */
function isInterceptedHandler(handler: object): boolean {
  return (
    Reflect.hasMetadata(RESOLVER_TYPE_METADATA, handler) ||
    isGatewayHandler(handler) ||
    rabbitHandler(handler) !== undefined
  );
}
