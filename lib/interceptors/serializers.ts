import { ClassSerializerInterceptor, ExecutionContext } from '@nestjs/common';
import { ContextIdFactory, type ModuleRef } from '@nestjs/core';
import { lastValueFrom, Observable, of, tap } from 'rxjs';

/** What a replay emits: stored already serialized, so the global serializers let it through. */
const replayed = new WeakSet<object>();
/** Serializers whose `serialize` lets replayed values through (see {@link passReplays}). */
const patched = new WeakSet<ClassSerializerInterceptor>();

/** Nest's (internal) wrapper of a request-scoped provider, as far as this reads it. */
interface ScopedWrapper {
  metatype?: unknown;
  getInstanceByContextId(
    contextId: unknown,
  ): { instance?: unknown; isResolved?: boolean } | undefined;
}

/** The part of Nest's (internal) container this reads: the application config. */
interface ContainerHost {
  container?: {
    applicationConfig?: {
      getGlobalInterceptors(): unknown[];
      getGlobalRequestInterceptors?(): ScopedWrapper[];
    };
  };
}

/** Thrown when a global serializer cannot be found for a request: storing would leak. */
export class IdempotencySerializerError extends Error {
  constructor() {
    super(
      'A request-scoped global ClassSerializerInterceptor (APP_INTERCEPTOR with scope REQUEST) ' +
        'is only supported on HTTP routes, and transient or durable ones not at all. Register it ' +
        'singleton-scoped, or bind it to the controller with @UseInterceptors().',
    );
    this.name = 'IdempotencySerializerError';
  }
}

/**
 * The app's global `ClassSerializerInterceptor`s (`useGlobalInterceptors()` or `APP_INTERCEPTOR`),
 * which run outside `@Idempotent()`. A controller's or method's own serializers run inside it (it
 * is their outermost interceptor), so what it receives from them is already what they send.
 *
 * The stored response must be what the client was sent: nothing a serializer hides (`@Exclude()`,
 * a `@Transform()` mask, `excludePrefixes`, nested instances, `@SerializeOptions({ type })`) may
 * reach the store. So a handler's values go through the global serializers, innermost first and
 * with their own options and the route's `@SerializeOptions()`, before they are stored. A replay
 * emits that stored form, which they must not serialize a second time (a plain object under
 * `strategy: 'excludeAll'` would lose every field; a `@Transform()` would run twice): they let
 * replayed values through, so a replay equals the first response byte for byte.
 */
export class GlobalSerializers {
  /** The singleton serializers found in the app's global interceptors, and what they came from. */
  private singletons: { from: unknown[]; length: number; found: ClassSerializerInterceptor[] } = {
    from: [],
    length: 0,
    found: [],
  };

  constructor(private readonly moduleRef?: ModuleRef) {}

  /** `values` as the global serializers would send them. */
  apply(context: ExecutionContext, values: unknown[]): unknown[] | Promise<unknown[]> {
    const serializers = this.find(context);
    // Without serializers (most apps), no promise: this runs for every stored response.
    return serializers.length === 0 ? values : this.serialize(context, values, serializers);
  }

  private async serialize(
    context: ExecutionContext,
    values: unknown[],
    serializers: ClassSerializerInterceptor[],
  ): Promise<unknown[]> {
    const sent: unknown[] = [];
    for (let value of values) {
      for (let i = serializers.length - 1; i >= 0; i--) {
        // Nest 12's intercept() is async (it loads class-transformer on first use); Nest 11's not.
        const serialized = await serializers[i].intercept(context, { handle: () => of(value) });
        value = await lastValueFrom(serialized, { defaultValue: value });
      }
      sent.push(value);
    }
    return sent;
  }

  /** A replay's values, which the global serializers then send as they are. */
  passThrough(context: ExecutionContext, replay: Observable<unknown>): Observable<unknown> {
    const serializers = this.find(context);
    if (serializers.length === 0) return replay;
    serializers.forEach(passReplays);
    return replay.pipe(
      tap((value) => typeof value === 'object' && value !== null && replayed.add(value)),
    );
  }

  /**
   * Whether the app's global interceptors, which run outside `@Idempotent()`, are all Nest's own
   * `ClassSerializerInterceptor` (or there are none): it hands text on as it is, so a replay may
   * send a body's JSON text in place of its value (see `HttpContextAdapter.replay`). Any other
   * (a subclass too), or a request-scoped one, may need the value.
   */
  passText(): boolean {
    const config = (this.moduleRef as ContainerHost | undefined)?.container?.applicationConfig;
    if (!config || (config.getGlobalRequestInterceptors?.() ?? []).length > 0) return false;
    return config
      .getGlobalInterceptors()
      .every((interceptor) => (interceptor as object)?.constructor === ClassSerializerInterceptor);
  }

  /**
   * Throws {@link IdempotencySerializerError} when a global serializer has no instance for this
   * request (a request-scoped one on RPC): called before the claim, so nothing is run or stored.
   */
  check(context: ExecutionContext): void {
    this.find(context);
  }

  /** This request's global serializers: singletons, then request-scoped ones, as Nest runs them. */
  private find(context: ExecutionContext): ClassSerializerInterceptor[] {
    // Nest keeps global interceptors in its application config, which it does not inject.
    const config = (this.moduleRef as ContainerHost | undefined)?.container?.applicationConfig;
    const globals = config?.getGlobalInterceptors() ?? [];
    // Looked through again only when the list changes: this runs on every request.
    if (this.singletons.from !== globals || this.singletons.length !== globals.length) {
      const singletons = globals.filter(
        (interceptor): interceptor is ClassSerializerInterceptor =>
          interceptor instanceof ClassSerializerInterceptor,
      );
      this.singletons = { from: globals, length: globals.length, found: singletons };
    }
    const scoped = config?.getGlobalRequestInterceptors?.() ?? [];
    if (scoped.length === 0) return this.singletons.found;
    const found = [...this.singletons.found];
    // Nest's router attached this request's context id to the request object.
    const request =
      context.getType() === 'http' ? context.switchToHttp().getRequest<object>() : undefined;
    for (const wrapper of scoped) {
      const metatype = wrapper.metatype;
      // A class provider names its class; a factory (useFactory) is known by what it made.
      const isSerializerClass =
        metatype === ClassSerializerInterceptor ||
        (typeof metatype === 'function' &&
          metatype.prototype instanceof ClassSerializerInterceptor);
      const host =
        request && wrapper.getInstanceByContextId(ContextIdFactory.getByRequest(request));
      if (host?.isResolved && host.instance instanceof ClassSerializerInterceptor) {
        found.push(host.instance);
        continue;
      }
      if (isSerializerClass) throw new IdempotencySerializerError();
    }
    return found;
  }
}

/** Makes one serializer send replayed values as they are (once per instance). */
function passReplays(serializer: ClassSerializerInterceptor): void {
  if (patched.has(serializer)) return;
  patched.add(serializer);
  const serialize = serializer.serialize;
  serializer.serialize = function (this: ClassSerializerInterceptor, response, options) {
    return typeof response === 'object' && response !== null && replayed.has(response)
      ? response
      : serialize.call(this, response, options);
  };
}
