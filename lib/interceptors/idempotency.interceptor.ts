import {
  CallHandler,
  ContextType,
  ExecutionContext,
  Inject,
  Injectable,
  Logger,
  NestInterceptor,
  BeforeApplicationShutdown,
  OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { HttpAdapterHost, ModuleRef, Reflector } from '@nestjs/core';
import { catchError, finalize, Observable, tap } from 'rxjs';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import { HttpContextAdapter } from '../adapters/http-context.adapter';
import { GolevelupContextAdapter } from '../adapters/golevelup-context.adapter';
import { GraphqlContextAdapter } from '../adapters/graphql-context.adapter';
import { GrpcContextAdapter, grpcPattern } from '../adapters/grpc-context.adapter';
import { RpcContextAdapter } from '../adapters/rpc-context.adapter';
import { WsContextAdapter } from '../adapters/ws-context.adapter';
import { ClaimCore } from '../core/claim-core';
import { describe, type EventSource } from '../core/outcome-events';
import { ownerToken, recordKey, recordScope } from '../core/record-key';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyKeyMissingError,
} from '../errors/idempotency.errors';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { resolveModuleOptions, type ResolvedModuleOptions } from '../options';
import { IdempotencyStore } from '../stores/idempotency.store';
import { isPromise } from '../utils/is-promise';
import { parseIdempotencyKey } from '../utils/key';
import { rabbitHandler } from '../utils/nest-metadata';
import { principalId, tenantId } from '../utils/principal';
import { withTimeout } from '../utils/timeout';
import { ClaimedHandler, type RouteClaim } from './claimed-handler';
import { MissingModuleStore, ModuleMissing } from './module-missing';
import { claimedFurtherIn } from './body-readers';
import { RequestIdentity } from './request-identity';
import { retryAfter, Route, routeIdentity, routeName, RouteResolver } from './route-resolver';
import { GlobalSerializers } from './serializers';

/** An idempotent route's request, as its events name it. */
type RouteSource = EventSource & { options: ResolvedIdempotencyOptions; cached: Route | null };

/** What a route whose records every caller shares logs once (quoted in the README). */
const UNSCOPED =
  "no principal (request.user) and no `scope`: every caller shares this route's records " +
  "(a caller can replay another's response). Set `scope`, or `scope: 'public'` for a public endpoint";

/** Requests (their contexts) an idempotency interceptor is handling (see `intercept`). */
const handling = new WeakSet<ExecutionContext>();

/**
 * Runs `@Idempotent()` handlers at most once per key: claims the key in one store round trip
 * before the handler runs, stores the outcome (awaited, owner-checked) before the response leaves,
 * and releases the claim when the handler fails. `@Idempotent()` binds it to its routes. To change
 * how keys, scopes or adapters are chosen, subclass it, override the protected hooks and register
 * the subclass as `APP_INTERCEPTOR`: it takes each request first, and the route-bound instance
 * steps aside.
 */
@Injectable()
export class IdempotencyInterceptor
  implements NestInterceptor, OnApplicationBootstrap, BeforeApplicationShutdown
{
  protected readonly logger = new Logger('Idempotency');
  private readonly adapters: Partial<
    Record<ContextType | 'graphql' | 'grpc' | 'rmq', IdempotencyContextAdapter>
  >;
  private readonly serializers: GlobalSerializers;
  private readonly routes: RouteResolver;
  private readonly core: ClaimCore;
  private readonly identity: RequestIdentity;
  private readonly handlers: ClaimedHandler;

  protected readonly store: IdempotencyStore;
  protected readonly options: ResolvedModuleOptions;
  /** Set when Nest built this interceptor without IdempotencyModule (see ModuleMissing). */
  private readonly missing?: ModuleMissing;

  /**
   * `store` and `options` come from IdempotencyModule. Without it (a controller's own test, an
   * app that forgot the module) they are undefined: the routes then serve requests without a key
   * and refuse those carrying one (see {@link ModuleMissing}).
   */
  constructor(
    @Optional() @Inject(IdempotencyStore) store: IdempotencyStore | undefined,
    @Optional() @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedModuleOptions | undefined,
    protected readonly reflector: Reflector,
    adapterHost: HttpAdapterHost,
    @Optional() moduleRef?: ModuleRef,
  ) {
    if (!store || !options) this.missing = new ModuleMissing(this.logger, reflector, moduleRef);
    // The defaults forRoot() has, so that routes resolve and their keys are read as with it.
    this.store = store ?? new MissingModuleStore();
    this.options = options ?? resolveModuleOptions({});
    this.serializers = new GlobalSerializers(moduleRef);
    this.adapters = {
      http: new HttpContextAdapter(adapterHost, () => this.serializers.passText()),
    };
    const isBase = this.constructor === IdempotencyInterceptor;
    this.routes = new RouteResolver(reflector, this.options, IdempotencyInterceptor, isBase);
    this.core = new ClaimCore(this.store, this.options, this.logger, moduleRef);
    this.identity = new RequestIdentity(this.core.events);
    this.handlers = new ClaimedHandler(this.core, this.serializers);
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    // Another idempotency interceptor may wrap the same request: a subclass registered globally
    // or bound to the route, or `globalInterceptor: true`. One handles it: a subclass bound to
    // the route wins over this class, else the first to run. It marks the context (Nest hands
    // every interceptor of a request the same one) while it handles the request, so an outer
    // interceptor that subscribes again (a retry) goes through the claim again.
    const route = this.routes.resolve(context);
    // Opted out (`@Idempotent(false)`) wins over what a subclass's getRouteOptions() would say.
    if (handling.has(context) || route?.subclassBound || route?.options.enabled === false) {
      return next.handle();
    }
    const options = this.getRouteOptions(context);
    if (!options?.enabled) return next.handle();
    const adapter = this.getAdapter(context);
    // A module-less instance never defers: its route may predate the claim point's binding.
    if (adapter?.bypass?.(context) || (!this.missing && claimedFurtherIn(context, this))) {
      return next.handle();
    }
    const handler = route?.name ?? routeName(context.getClass(), context.getHandler());
    if (!adapter) {
      // The boot checks refuse @Idempotent() where no adapter serves it: only a subclass's own
      // getAdapter() can leave a context type out. Never run unprotected without a word.
      throw new Error(
        `IdempotencyModule: @Idempotent() on ${handler} cannot work: ` +
          `${context.getType()} handlers are not supported`,
      );
    }
    const unsupported = adapter.unsupported(context);
    if (unsupported) {
      this.core.events.warnOnce(handler, `@Idempotent() has no effect here: ${unsupported}`);
      return next.handle();
    }
    const identity = this.routeOf(context, options, adapter, route);
    const source: RouteSource = { options, handler, route: identity, cached: route };
    handling.add(context);
    const done = () => void handling.delete(context);
    // Transports where a thrown refusal would go astray answer it instead (a gateway's ack).
    const answer = adapter.answer && ((e: unknown) => adapter.answer!(context, e, options));
    try {
      const handled = await this.claimAndRun(context, next, adapter, source, done);
      return answer ? handled.pipe(catchError(answer)) : handled;
    } catch (error) {
      done();
      if (!(error instanceof IdempotencyError)) throw error;
      this.settleRejected(context, source, error);
      const exception = adapter.toException(context, error, options);
      if (answer) return answer(exception);
      throw exception;
    }
  }

  /** Warns when the app has `@Idempotent()` routes but not IdempotencyModule (see ModuleMissing). */
  onApplicationBootstrap(): void {
    this.missing?.warnAtBoot();
  }

  /**
   * Stops renewing leases at `app.close()`: a handler still running then keeps its key for at
   * most lockTtl, so a hung one cannot hold it while the server waits for its request (Nest
   * closes the server before `onApplicationShutdown`, and that wait never ends for a hung
   * handler). Another instance then serves the retry; a late outcome here is fenced.
   */
  beforeApplicationShutdown(): void {
    this.core.close();
  }

  /** The route's options (module < controller < method), or undefined when it is not idempotent. */
  protected getRouteOptions(context: ExecutionContext): ResolvedIdempotencyOptions | undefined {
    return this.routes.resolve(context)?.options;
  }

  /** The transport adapter for this context, or undefined when the transport is not supported. */
  protected getAdapter(context: ExecutionContext): IdempotencyContextAdapter | undefined {
    // Adapters of optional transports are made on first use: they load their peer packages.
    const type = context.getType<ContextType | 'graphql' | 'rmq'>();
    if (type === 'http') return this.adapters.http;
    if (type === 'graphql') return (this.adapters.graphql ??= new GraphqlContextAdapter());
    if (type === 'ws') return (this.adapters.ws ??= new WsContextAdapter());
    // golevelup's context type; another framework might use the name too.
    if (type === 'rmq' && rabbitHandler(context.getHandler())) {
      return (this.adapters.rmq ??= new GolevelupContextAdapter());
    }
    if (type !== 'rpc') return undefined;
    if (grpcPattern(context.getHandler())) return (this.adapters.grpc ??= new GrpcContextAdapter());
    return (this.adapters.rpc ??= new RpcContextAdapter());
  }

  /**
   * What a key is unique within: the route (its method and pattern as Nest registered it, or the
   * handler and message pattern; or the `keySpace` it shares), plus who the record belongs to:
   * the tenant `scope()` returns, else the request's authenticated principal (see the option
   * `scope`). Throws when a principal has no stable identity, rather than sharing its records.
   * `route`: the route's identity, when the caller worked it out already.
   */
  protected getScope(
    context: ExecutionContext,
    handler: string,
    options: ResolvedIdempotencyOptions,
    route = this.routeOf(context, options, this.getAdapter(context), this.routes.resolve(context)),
  ): string | Promise<string> {
    const { scope } = options;
    if (scope === 'public') return route;
    // A tenant (sync or async); none (undefined, null) falls back to the principal.
    const tenant = scope?.(context);
    if (!isPromise(tenant)) return this.ownerScope(context, handler, route, tenant);
    const bounded = withTimeout(tenant, options.storeTimeout, () => new Error('scope timed out'));
    return bounded.then((value) => this.ownerScope(context, handler, route, value));
  }

  /** The scope of a route's record, owned by the tenant, else the principal, else nobody. */
  private ownerScope(
    context: ExecutionContext,
    handler: string,
    route: string,
    tenant: unknown,
  ): string {
    const tenancy = tenantId(tenant, handler);
    if (tenancy !== undefined) return recordScope(route, tenancy, undefined);
    const principal = principalId(this.getAdapter(context)?.principal?.(context), handler);
    if (principal === undefined && ['http', 'graphql', 'ws'].includes(context.getType())) {
      this.core.events.warnOnce(
        handler,
        context.getType() === 'ws'
          ? UNSCOPED.replace('request.user', 'client.data.user')
          : UNSCOPED,
        'unscoped',
      );
    }
    return recordScope(route, undefined, principal);
  }

  /**
   * The route's identity in record keys (see {@link routeIdentity}). A subclass may make routes
   * idempotent through getRouteOptions() alone: there is no cached route then.
   */
  private routeOf(
    context: ExecutionContext,
    options: ResolvedIdempotencyOptions,
    adapter: IdempotencyContextAdapter | undefined,
    route: Route | null,
  ): string {
    return routeIdentity(
      options.keySpace,
      route,
      adapter?.routePattern?.(context),
      route ? route.id : routeName(context.getClass(), context.getHandler()),
    );
  }

  /** Runs `onReject` for a request refused without running the handler. */
  private settleRejected(
    context: ExecutionContext,
    source: RouteSource,
    error: IdempotencyError,
  ): void {
    const { code } = error;
    if (code === IdempotencyErrorCode.KeyMissing || code === IdempotencyErrorCode.KeyInvalid) {
      this.core.events.emit(source, 'rejected', undefined, error);
    }
    try {
      source.options.onReject?.(context, error);
    } catch (hookError) {
      this.logger.error(`${source.handler}: onReject failed (${describe(hookError)})`);
    }
  }

  private async claimAndRun(
    context: ExecutionContext,
    next: CallHandler,
    adapter: IdempotencyContextAdapter,
    source: RouteSource,
    done: () => void,
  ): Promise<Observable<unknown>> {
    const { options, handler } = source;
    let raw = this.identity.key(context, adapter, options, handler);
    if (isPromise(raw)) raw = await raw;
    if (raw === undefined || raw === null) {
      if (options.required) throw new IdempotencyKeyMissingError(options.headerName);
      this.core.events.emit(source, 'bypassed');
      return unmarkAfter(this.handlers.unclaimed(next, options), done);
    }
    // Only the HTTP header is an RFC 8941 structured field; other keys are taken as they are.
    const header = !options.key && ['http', 'graphql'].includes(context.getType());
    const key = parseIdempotencyKey(raw, options.maxKeyLength, header);
    if (this.missing) throw this.missing.refuse(handler);
    this.serializers.check(context); // before anything runs or is stored
    let scope = this.getScope(context, handler, options, source.route);
    if (isPromise(scope)) scope = await scope;
    // Named one by one: on Node 20, `{ ...source, key }` cost 1 to 5 µs (V8's slow path for a
    // spread followed by properties), against 20 ns for this.
    const claim: RouteClaim = {
      options,
      handler,
      route: source.route,
      cached: source.cached,
      key: recordKey(options.keyPrefix, scope, key),
      token: ownerToken(),
      scope,
      clientKey: key,
    };
    let fingerprint = this.identity.fingerprint(context, adapter, options, handler);
    if (isPromise(fingerprint)) fingerprint = await fingerprint;
    const request = { token: claim.token, fingerprint, leaseMs: options.lockTtl };
    const answer = await this.core.claim(claim, request, (ms) => retryAfter(claim.cached, ms));
    if (answer.status === 'unprotected') {
      return unmarkAfter(this.handlers.unclaimed(next, options), done);
    }
    // An outer retry may have answered this request with an error before: drop its headers.
    adapter.reset?.(context);
    if (answer.status === 'completed') {
      done(); // the handler never runs, nor do the interceptors inside this one
      options.onReplay?.(context);
      return this.serializers.passThrough(
        context,
        adapter.replay(context, answer.snapshot, options),
      );
    }
    adapter.outcome?.(context, 'first-run', options);
    return this.handlers.run(context, next, adapter, claim, done);
  }
}

/** `handled`, with the request unmarked once it ends (see `intercept`). */
function unmarkAfter(handled: Observable<unknown>, done: () => void): Observable<unknown> {
  // tap() before finalize(): an outer retry gets the error, and subscribes again, first.
  return handled.pipe(tap({ complete: done, error: done }), finalize(done));
}
