import { ClassSerializerInterceptor, ExecutionContext } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { lastValueFrom, Observable, of, tap } from 'rxjs';

/** What a replay emits: stored already serialized, so the global serializers let it through. */
const replayed = new WeakSet<object>();
/** Serializers whose `serialize` lets replayed values through (see {@link passReplays}). */
const patched = new WeakSet<ClassSerializerInterceptor>();

/** The part of Nest's (internal) container this reads: the application config. */
interface ContainerHost {
  container?: { applicationConfig?: { getGlobalInterceptors(): unknown[] } };
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
  constructor(private readonly moduleRef?: ModuleRef) {}

  /** `values` as the global serializers would send them. */
  async apply(context: ExecutionContext, values: unknown[]): Promise<unknown[]> {
    const serializers = this.find();
    if (serializers.length === 0) return values;
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
  passThrough(replay: Observable<unknown>): Observable<unknown> {
    const serializers = this.find();
    if (serializers.length === 0) return replay;
    serializers.forEach(passReplays);
    return replay.pipe(
      tap((value) => typeof value === 'object' && value !== null && replayed.add(value)),
    );
  }

  private find(): ClassSerializerInterceptor[] {
    // Nest keeps global interceptors in its application config, which it does not inject.
    const config = (this.moduleRef as ContainerHost | undefined)?.container?.applicationConfig;
    const globals = config?.getGlobalInterceptors() ?? [];
    return globals.filter((interceptor) => interceptor instanceof ClassSerializerInterceptor);
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
