/**
 * Nest's private metadata keys and enum values this package reads (Nest 10-12), in one place.
 * They are not part of Nest's public API (the microservices ones live in an optional peer this
 * package must not import), so they are written out here; test/unit/nest-metadata.spec.ts checks
 * each against what Nest exports.
 */

/** `@UseInterceptors()` bindings, on a controller class or a handler. */
export const INTERCEPTORS_METADATA = '__interceptors__';
/** `@Inject()` on constructor parameters (`{ index, param }`), on the class. */
export const SELF_DECLARED_DEPS_METADATA = 'self:paramtypes';
/**
 * The token multer's interceptors of `@nestjs/platform-express` (`FileInterceptor`,
 * `FilesInterceptor`...) inject their module options by: how they are told apart, as `mixin()`
 * gives each one a random class name.
 */
export const MULTER_MODULE_OPTIONS = 'MULTER_MODULE_OPTIONS';
/** A route's path(s), on the controller class and on the handler. */
export const PATH_METADATA = 'path';
/** A route's HTTP method (a `RequestMethod` number), on the handler. */
export const METHOD_METADATA = 'method';
/** `@Controller({ host })`, on the controller class. */
export const HOST_METADATA = 'host';
/** `@Version()`, on the controller class or the handler. */
export const VERSION_METADATA = '__version__';
/** `@HttpCode()`, on the handler. */
export const HTTP_CODE_METADATA = '__httpCode__';
/** Route parameter decorators (`@Res()`, `@Next()`...), on the class by method name. */
export const ROUTE_ARGS_METADATA = '__routeArguments__';
/** `@Res({ passthrough: true })`, on the class by method name. */
export const RESPONSE_PASSTHROUGH_METADATA = '__responsePassthrough__';
/** `@Sse()`, on the handler. */
export const SSE_METADATA = '__sse__';
/** `@MessagePattern()` / `@EventPattern()` patterns, on the handler. */
export const PATTERN_METADATA = 'microservices:pattern';
/** Whether a microservice handler is a message or an event handler ({@link EVENT_HANDLER}). */
export const PATTERN_HANDLER_METADATA = 'microservices:handler_type';
/** A GraphQL resolver method's operation type (`'Query'`, `'Mutation'`, `'Subscription'`). */
export const RESOLVER_TYPE_METADATA = 'graphql:resolver_type';
/** `@ResolveField()` (a field resolver), on the handler. */
export const RESOLVER_PROPERTY_METADATA = 'graphql:resolve_property';
/** `@ResolveReference()` (Apollo Federation), on the handler. */
export const RESOLVER_REFERENCE_METADATA = 'graphql:resolve_reference';
/**
 * `@SubscribeMessage()` of `@nestjs/websockets` (not installed here, so not compared by the
 * test): a gateway's message handler, which Nest runs through interceptors.
 */
export const MESSAGE_MAPPING_METADATA = 'websockets:message_mapping';
/** `PatternHandler.EVENT` of `@nestjs/microservices`. */
export const EVENT_HANDLER = 2;
/** `RouteParamtypes.RESPONSE` and `RouteParamtypes.NEXT` of `@nestjs/common`. */
export const RESPONSE_PARAM_TYPES = [1, 2];

/**
 * Whether a handler sends the response itself (`@Res()` or `@Next()` without `passthrough`): the
 * rule Nest applies.
 */
export function respondsItself(target: object, handler: object): boolean {
  const name = (handler as { name: string }).name;
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, target, name) ?? {}) as object;
  const injectsResponse = Object.keys(args).some((key) =>
    RESPONSE_PARAM_TYPES.includes(Number(key.split(':')[0])),
  );
  return injectsResponse && !Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, target, name);
}
