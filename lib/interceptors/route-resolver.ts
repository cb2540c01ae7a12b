import type { ExecutionContext } from '@nestjs/common';
import type { Reflector } from '@nestjs/core';
import { IdempotentOptions } from '../decorators/idempotent-options.metadata';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import {
  HOST_METADATA,
  INTERCEPTORS_METADATA,
  isEventHandler,
  PATH_METADATA,
  PATTERN_METADATA,
  VERSION_METADATA,
} from '../utils/nest-metadata';
import { mergeOptions, type ResolvedModuleOptions } from '../options';

/** What the interceptor works out once per route. */
export interface Route {
  options: ResolvedIdempotencyOptions;
  /** `Controller.method`, for logs and events. */
  name: string;
  /**
   * What tells this route apart when the transport names no route pattern: for a microservice
   * handler, `Controller.method` and its patterns; otherwise also its path metadata.
   */
  id: string;
  /** What an HTTP route pattern does not say: ` version=…` and ` host=…` when set, else ''. */
  suffix: string;
  /** A subclass of the interceptor is bound to the route as well, and handles its requests. */
  subclassBound: boolean;
  /** Mean time its handler takes in this process, in ms (moving average); 0 before a first run. */
  runMs: number;
}

/** The shortest wait a 409 asks for, in ms (HTTP's Retry-After counts whole seconds). */
const MIN_RETRY_AFTER_MS = 1_000;

/** Weight of the newest run in a route's mean handler time (an exponential moving average). */
const RUN_TIME_WEIGHT = 0.2;

/**
 * Works out, once per controller class and handler, whether a route is idempotent and with which
 * options (module < event defaults < controller < method), and caches it.
 */
export class RouteResolver {
  private readonly routes = new WeakMap<object, WeakMap<object, Route | null>>();

  /**
   * @param interceptor the class of the interceptor resolving routes: the base class steps aside
   *   on routes that also bind a subclass of it.
   */
  constructor(
    private readonly reflector: Reflector,
    private readonly options: ResolvedModuleOptions,
    private readonly interceptor: abstract new (...args: never[]) => object,
    private readonly isBase: boolean,
  ) {}

  /** The cached facts of an `@Idempotent()` route, or null for any other route. */
  resolve(context: ExecutionContext): Route | null {
    const target = context.getClass();
    const handler = context.getHandler();
    let perClass = this.routes.get(target);
    if (!perClass) this.routes.set(target, (perClass = new WeakMap()));
    let route = perClass.get(handler);
    if (route === undefined) {
      route = this.build(target, handler);
      perClass.set(handler, route);
    }
    return route;
  }

  private build(target: object, handler: object): Route | null {
    const options = routeOptions(this.reflector, this.options, target, handler);
    if (!options) return null;
    return {
      options,
      name: routeName(target, handler),
      ...staticIdentity(target, handler),
      subclassBound: this.isBase && this.bindsSubclass(target, handler),
      runMs: 0,
    };
  }

  /** Whether `@UseInterceptors()` on the class or the handler binds a subclass of the interceptor. */
  private bindsSubclass(target: object, handler: object): boolean {
    const bound: unknown[] = [
      ...((Reflect.getMetadata(INTERCEPTORS_METADATA, target) as unknown[] | undefined) ?? []),
      ...((Reflect.getMetadata(INTERCEPTORS_METADATA, handler) as unknown[] | undefined) ?? []),
    ];
    const base = this.interceptor;
    return bound.some((interceptor) =>
      typeof interceptor === 'function'
        ? interceptor.prototype instanceof base
        : interceptor instanceof base && interceptor.constructor !== base,
    );
  }
}

/**
 * A route's options (module < event defaults < controller < method), or undefined when
 * `@Idempotent()` is on neither the controller nor the handler. Opted out: `enabled` is false.
 * Event defaults apply to `@EventPattern()` and golevelup's `@RabbitSubscribe()` handlers.
 */
export function routeOptions(
  reflector: Reflector,
  module: ResolvedModuleOptions,
  target: object,
  handler: object,
): ResolvedIdempotencyOptions | undefined {
  const onClass = reflector.get(IdempotentOptions, target as never);
  const onMethod = reflector.get(IdempotentOptions, handler as never);
  if (!onClass && !onMethod) return undefined;
  const events = isEventHandler(handler) ? module.eventDefaults : undefined;
  return mergeOptions(module, events, onClass, onMethod);
}

/**
 * What Nest's metadata says of a route's identity: `id` for when the transport names no route
 * pattern (a microservice handler: `Controller.method` and its patterns), and the `suffix` an HTTP
 * pattern needs (` version=…`, ` host=…`).
 */
export function staticIdentity(target: object, handler: object): { id: string; suffix: string } {
  const pattern: unknown = Reflect.getMetadata(PATTERN_METADATA, handler);
  const paths = [
    Reflect.getMetadata(PATH_METADATA, target),
    Reflect.getMetadata(PATH_METADATA, handler),
  ];
  const version: unknown =
    Reflect.getMetadata(VERSION_METADATA, handler) ?? Reflect.getMetadata(VERSION_METADATA, target);
  const host: unknown = Reflect.getMetadata(HOST_METADATA, target);
  const suffix =
    (version === undefined ? '' : ` version=${metadataText(version)}`) +
    (host === undefined ? '' : ` host=${metadataText(host)}`);
  return { id: `${routeName(target, handler)} ${metadataText(pattern ?? paths)}${suffix}`, suffix };
}

/**
 * A route's identity in its records' keys, stable across restarts and instances: the key space
 * when the route shares one; else the HTTP method and route pattern as registered (global
 * prefix, RouterModule paths, URI version), with the version and host metadata; else (RPC) the
 * handler and its patterns. Two routes Nest tells apart never share records.
 */
export function routeIdentity(
  keySpace: string | undefined,
  route: Route | null,
  pattern: string | undefined,
  fallback: string,
): string {
  if (keySpace !== undefined) return `space:${keySpace}`;
  if (pattern !== undefined) return pattern + (route?.suffix ?? '');
  return route?.id ?? fallback;
}

/**
 * Metadata as stable text: JSON, with symbols (`VERSION_NEUTRAL`) and regular expressions (hosts)
 * by their description and source, which JSON would drop.
 */
function metadataText(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    typeof item === 'symbol' ? item.toString() : item instanceof RegExp ? String(item) : item,
  );
}

/** Adds one run of the handler to its route's mean handler time. */
export function timeRun(route: Route | null, started: number): void {
  if (!route) return;
  const ms = performance.now() - started;
  route.runMs = route.runMs === 0 ? ms : route.runMs + (ms - route.runMs) * RUN_TIME_WEIGHT;
}

/**
 * `Controller.method`. A handler some framework bound before Nest wrapped it (golevelup's
 * RabbitMQ handlers) is named `bound method`: named by its method all the same, as record keys
 * name it.
 */
export function routeName(target: object, handler: object): string {
  const method = (handler as { name: string }).name.replace(/^(bound )+/, '');
  return `${(target as { name: string }).name}.${method}`;
}

/**
 * How long a duplicate is told to wait (Retry-After, RPC `retryAfterMs`): the route's mean handler
 * time in this process, at least 1 s, and never past the lease the holder has left.
 */
export function retryAfter(route: Route | null, leaseLeftMs: number): number {
  return Math.min(leaseLeftMs, Math.max(MIN_RETRY_AFTER_MS, Math.ceil(route?.runMs ?? 0)));
}
