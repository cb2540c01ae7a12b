import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { bodyUnread, isMultipart, type MultipartRequestLike } from '../adapters/multipart';
import {
  INTERCEPTORS_METADATA,
  MULTER_MODULE_OPTIONS,
  SELF_DECLARED_DEPS_METADATA,
} from '../utils/nest-metadata';

/** Requests (their contexts) left to the claim point, with the interceptor that left them. */
const deferred = new WeakMap<ExecutionContext, NestInterceptor>();
/** Requests that have reached the claim point: from there on, nothing is left further in. */
const reached = new WeakSet<ExecutionContext>();

/**
 * Where, on a route whose own interceptors read the body (multer's `FileInterceptor`...), the
 * idempotency interceptor claims a multipart request: right after them (see hoistInterceptor,
 * which binds it there), once the body is parsed and before every other interceptor of the route
 * and the handler. The interceptor that first met the request, with its body still unread, left
 * it here ({@link claimedFurtherIn}) and takes it now, as it would have where it stands. For any
 * other request it passes through.
 */
export const claimPoint: NestInterceptor = {
  intercept(context: ExecutionContext, next: CallHandler) {
    const owner = deferred.get(context);
    if (!owner || reached.has(context)) return next.handle();
    reached.add(context);
    return owner.intercept(context, next);
  },
};

/**
 * Whether `interceptor` leaves this request to the claim point (see {@link claimPoint}): a
 * multipart body no parser has read yet, on a route bound to the claim point; or a request another
 * binding left there already. The claim point never leaves it further: a body still unread there
 * is refused.
 */
export function claimedFurtherIn(context: ExecutionContext, interceptor: NestInterceptor): boolean {
  if (reached.has(context)) return false;
  if (deferred.has(context)) return true;
  if (context.getType() !== 'http') return false;
  const request = context.switchToHttp().getRequest<MultipartRequestLike>();
  if (!isMultipart(request) || !bodyUnread(request)) return false;
  const bound = [context.getClass(), context.getHandler()].flatMap(
    (target) => (Reflect.getMetadata(INTERCEPTORS_METADATA, target) as unknown[] | undefined) ?? [],
  );
  if (!bound.includes(claimPoint)) return false;
  deferred.set(context, interceptor);
  return true;
}

/** Whether an interceptor (class or instance) is one of multer's, which read the request body. */
export function readsBody(bound: unknown): boolean {
  const type = typeof bound === 'function' ? bound : (bound as object | null)?.constructor;
  if (!type) return false;
  const deps = Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, type) as
    { param?: unknown }[] | undefined;
  return deps?.some((dep) => dep.param === MULTER_MODULE_OPTIONS) ?? false;
}
