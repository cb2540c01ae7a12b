import type { ModuleRef, ModulesContainer } from '@nestjs/core';
import { Reflector } from '@nestjs/core';
import { grpcPattern } from '../adapters/grpc-context.adapter';
import { IdempotentOptions } from '../decorators/idempotent-options.metadata';
import { preparePropagation } from '../propagation/install';
import {
  acksItself,
  isGatewayHandler,
  PATTERN_METADATA,
  rabbitHandler,
  RESOLVER_TYPE_METADATA,
  respondsItself,
  SSE_METADATA,
} from '../utils/nest-metadata';
import type { ResolvedModuleOptions } from '../options';
import { assertResumableReady } from '../core/step-store-checks';
import { assertTransactionalReady } from '../core/transactions';
import { controllers } from './outermost';
import { routeName, routeOptions, staticIdentity } from './route-resolver';
import { refuseUninterceptedMethods } from './unintercepted-methods';

/**
 * Checks at boot what would otherwise fail, or quietly misbehave, on the first request:
 * - `@Idempotent()` where Nest runs no interceptor (a provider's method: a BullMQ processor, a
 *   `@Cron` method, an `@SqsMessageHandler`...), which would do nothing (see
 *   {@link refuseUninterceptedMethods});
 * - a `transactional` route needs a store that writes in the app's transaction and the app's
 *   TransactionHost, and must not answer through `@Res()` / `@Next()` (its response would leave
 *   before the commit, which may still fail);
 * - a `resumable` route needs a store that records steps (in the app's transaction, when it is
 *   `transactional` too);
 * - two idempotent microservice handlers must not share an identity (one controller class name,
 *   method and pattern in two modules, both run for an event): the second would be skipped as
 *   the first one's duplicate;
 * - `@Idempotent()` on a GraphQL subscription, an `@Sse()` route or a streaming gRPC method,
 *   which cannot be replayed (a subscription of an idempotent resolver class is left alone, as its queries are);
 *   on a gateway's handler that acks through `@Ack()` or a golevelup batch subscriber, whose
 *   answers cannot be stored.
 * Every handler these checks see is of a context type the interceptor serves (HTTP, RPC, gRPC,
 * GraphQL, WebSocket gateways, golevelup RabbitMQ): `@Idempotent()` anywhere else is refused by
 * {@link refuseUninterceptedMethods}, never left to do nothing at the first message.
 */
export function checkRoutes(
  modules: ModulesContainer,
  options: ResolvedModuleOptions,
  store: object,
  moduleRef: ModuleRef,
): void {
  const reflector = new Reflector();
  refuseUninterceptedMethods(modules, reflector);
  const transactional: (true | { connectionName?: string })[] = [];
  const resumable: { name: string; transactional: boolean | { connectionName?: string } }[] = [];
  const identities = new Map<string, { module: object; metatype: object; where: string }>();
  let propagating = options.propagateKeys;
  for (const { module, metatype, handlers } of controllers(modules)) {
    for (const handler of handlers) {
      const route = routeOptions(reflector, options, metatype, handler);
      if (!route?.enabled) continue;
      const name = routeName(metatype, handler);
      refuseStreams(reflector, name, metatype, handler);
      refuseUnstorable(name, metatype, handler);
      propagating ||= route.propagateKeys;
      if (route.transactional) {
        if (respondsItself(metatype, handler)) {
          throw new Error(
            `IdempotencyModule: ${name} is \`transactional\` and answers through @Res() or ` +
              '@Next(): its response would leave before the transaction commits. Return the ' +
              'response (or use @Res({ passthrough: true })).',
          );
        }
        transactional.push(route.transactional);
      }
      if (route.resumable) resumable.push({ name, transactional: route.transactional });
      if (route.keySpace !== undefined || !Reflect.hasMetadata(PATTERN_METADATA, handler)) continue;
      const { id } = staticIdentity(metatype, handler);
      const where = `${name} in ${module.name}`;
      const other = identities.get(id);
      if (other && (other.module !== module || other.metatype !== metatype)) {
        throw new Error(
          `IdempotencyModule: ${other.where} and ${where} would share their idempotency ` +
            `records (${id}), so one would be skipped as the other's duplicate. Rename one of ` +
            'the controller classes (or register the controller in one module only).',
        );
      }
      identities.set(id, { module, metatype, where });
    }
  }
  assertTransactionalReady(transactional, store, moduleRef);
  assertResumableReady(resumable, store);
  preparePropagation(propagating, options, modules);
}

/**
 * Throws for `@Idempotent()` on a subscription, an `@Sse()` route or a streaming gRPC method:
 * nothing to replay. On a class, such methods are left alone (as its queries are).
 */
function refuseStreams(
  reflector: Reflector,
  name: string,
  metatype: object,
  handler: object,
): void {
  const onMethod = reflector.get(IdempotentOptions, handler as never);
  if (onMethod && Reflect.getMetadata(RESOLVER_TYPE_METADATA, handler) === 'Subscription') {
    throw new Error(
      `IdempotencyModule: ${name} is a GraphQL subscription: @Idempotent() makes mutations ` +
        'idempotent, a subscription has no single result to replay. Remove @Idempotent() from it.',
    );
  }
  if (onMethod && Reflect.getMetadata(SSE_METADATA, handler)) {
    throw new Error(
      `IdempotencyModule: ${name} is an @Sse() route: @Idempotent() stores one response to replay, ` +
        'a server-sent event stream has none. Remove @Idempotent() from it.',
    );
  }
  const grpc = grpcPattern(handler);
  if (onMethod && grpc && grpc.streaming !== 'no_stream') {
    throw new Error(
      // @GrpcStreamMethod() replaces the method by an anonymous function: named by its class.
      `IdempotencyModule: ${(metatype as { name: string }).name} serves the streaming gRPC ` +
        `method ${grpc.service}/${grpc.rpc}: ` +
        '@Idempotent() makes unary methods idempotent, a stream cannot be replayed. Remove ' +
        '@Idempotent() from it.',
    );
  }
}

/**
 * Throws for `@Idempotent()` on a handler whose answer cannot be stored and sent again: a
 * gateway's handler that acks through `@Ack()` (a replay would never call it), a golevelup batch
 * subscriber (one call for many messages, which one key cannot stand for).
 */
function refuseUnstorable(name: string, metatype: object, handler: object): void {
  if (isGatewayHandler(handler) && acksItself(metatype, handler)) {
    throw new Error(
      `IdempotencyModule: ${name} acknowledges through @Ack(): a replay could not send that ack ` +
        'again. Return the value instead (Nest sends it as the ack), or remove @Idempotent().',
    );
  }
  if (rabbitHandler(handler)?.batchOptions) {
    throw new Error(
      `IdempotencyModule: ${name} is a golevelup batch subscriber (batchOptions): it handles ` +
        'many messages in one call, which one idempotency key cannot stand for. Remove ' +
        '@Idempotent() and call IdempotencyService.run() per message inside it (docs/jobs.md).',
    );
  }
}
