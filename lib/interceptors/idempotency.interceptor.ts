import {
  CallHandler,
  ContextType,
  ExecutionContext,
  Inject,
  Injectable,
  Logger,
  NestInterceptor,
  Optional,
  RequestTimeoutException,
} from '@nestjs/common';
import { HttpAdapterHost, ModuleRef, Reflector } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { finalize, Observable, tap } from 'rxjs';
import type { IdempotencyContextAdapter } from '../adapters/context-adapter';
import { HttpContextAdapter } from '../adapters/http-context.adapter';
import { RpcContextAdapter } from '../adapters/rpc-context.adapter';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyInProgressError,
  IdempotencyKeyMissingError,
  IdempotencyKeyReusedError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import { createOpenTelemetryMetrics } from '../observability/metrics';
import { ClaimRequest, ClaimResult, IdempotencyStore } from '../stores/idempotency.store';
import { parseIdempotencyKey, recordKey } from '../utils/key';
import type { ResolvedModuleOptions } from '../utils/options';
import { principalId } from '../utils/principal';
import { decodeResponse, encodeResponse, packResponse } from '../utils/response-codec';
import { describe, OutcomeEvents } from './outcome-events';
import { OutcomeWaiter } from './outcome-waiter';
import { Route, routeName, RouteResolver, timeRun } from './route-resolver';
import { GlobalSerializers } from './serializers';
import { Claim, StoreCalls } from './store-calls';

/** How long a client is told to wait after a store outage, in ms (Retry-After on 503). */
const STORE_RETRY_AFTER_MS = 1_000;
/** The shortest wait a 409 asks for, in ms (HTTP's Retry-After counts whole seconds). */
const MIN_RETRY_AFTER_MS = 1_000;

/** Requests (their contexts) an idempotency interceptor is handling (see `intercept`). */
const handling = new WeakSet<ExecutionContext>();

/** A claim and the route it was made on (none when a subclass made the route idempotent). */
interface RouteClaim extends Claim {
  route: Route | null;
}

/**
 * Runs `@Idempotent()` handlers at most once per key: claims the key in one store round trip
 * before the handler runs, stores the outcome (awaited, owner-checked) before the response leaves,
 * and releases the claim when the handler fails. `@Idempotent()` binds it to its routes. To change
 * how keys, scopes or adapters are chosen, subclass it, override the protected hooks and register
 * the subclass as `APP_INTERCEPTOR`: it takes each request first, and the route-bound instance
 * steps aside.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  protected readonly logger = new Logger('Idempotency');
  private readonly adapters: Partial<Record<ContextType, IdempotencyContextAdapter>>;
  private readonly serializers: GlobalSerializers;
  private readonly routes: RouteResolver;
  private readonly events: OutcomeEvents;
  private readonly calls: StoreCalls;
  private readonly waiter: OutcomeWaiter;

  constructor(
    protected readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS)
    protected readonly options: ResolvedModuleOptions,
    protected readonly reflector: Reflector,
    adapterHost: HttpAdapterHost,
    @Optional() moduleRef?: ModuleRef,
  ) {
    this.adapters = { http: new HttpContextAdapter(adapterHost) };
    this.serializers = new GlobalSerializers(moduleRef);
    const isBase = this.constructor === IdempotencyInterceptor;
    this.routes = new RouteResolver(reflector, options, IdempotencyInterceptor, isBase);
    const metrics = options.metrics === false ? undefined : createOpenTelemetryMetrics();
    this.events = new OutcomeEvents(this.logger, metrics);
    this.calls = new StoreCalls(store, this.events, this.logger);
    this.waiter = new OutcomeWaiter(this.calls, this.events, this.logger);
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    // Another idempotency interceptor may wrap the same request: a subclass registered globally
    // or bound to the route, or `globalInterceptor: true`. One handles it: a subclass bound to
    // the route wins over this class, else the first to run. It marks the context (Nest hands
    // every interceptor of a request the same one) while it handles the request, so an outer
    // interceptor that subscribes again (a retry) goes through the claim again.
    const route = this.routes.resolve(context);
    if (handling.has(context) || route?.subclassBound) return next.handle();
    const options = this.getRouteOptions(context);
    if (!options) return next.handle();
    const adapter = this.getAdapter(context);
    const handler = route?.name ?? routeName(context.getClass(), context.getHandler());
    const unsupported = adapter
      ? adapter.unsupported(context)
      : `${context.getType()} handlers are not supported yet`;
    if (!adapter || unsupported) {
      this.events.warnOnce(handler, `@Idempotent() has no effect here: ${unsupported}`);
      return next.handle();
    }
    handling.add(context);
    const done = () => void handling.delete(context);
    try {
      const handled = await this.claimAndRun(context, next, adapter, options, handler);
      // tap() before finalize(): an outer retry gets the error, and subscribes again, first.
      return handled.pipe(tap({ complete: done, error: done }), finalize(done));
    } catch (error) {
      done();
      if (!(error instanceof IdempotencyError)) throw error;
      this.settleRejected(context, options, handler, error);
      throw adapter.toException(context, error, options);
    }
  }

  /** The route's options (module < controller < method), or undefined when it is not idempotent. */
  protected getRouteOptions(context: ExecutionContext): ResolvedIdempotencyOptions | undefined {
    return this.routes.resolve(context)?.options;
  }

  /** The transport adapter for this context, or undefined when the transport is not supported. */
  protected getAdapter(context: ExecutionContext): IdempotencyContextAdapter | undefined {
    const type = context.getType();
    if (type === 'rpc') this.adapters.rpc ??= new RpcContextAdapter();
    return this.adapters[type];
  }

  /**
   * What a key is unique within: the handler (class, method, route path, version, message
   * pattern: two controllers of the same name never share records), plus who the record belongs
   * to: the tenant `scope()` returns, else the request's authenticated principal (see the option
   * `scope`). Throws when a principal has no stable identity, rather than sharing its records.
   */
  protected getScope(
    context: ExecutionContext,
    handler: string,
    options: ResolvedIdempotencyOptions,
  ): string {
    // A subclass may make routes idempotent through getRouteOptions() alone: no cached route then.
    const route =
      this.routes.resolve(context)?.id ?? routeName(context.getClass(), context.getHandler());
    const { scope } = options;
    if (scope === 'public') return route;
    // A tenant, typed (`1` and `'1'` differ); none (undefined, null) falls back to the principal.
    const tenant: unknown = scope?.(context);
    if (tenant !== undefined && tenant !== null)
      return `${route}\0t:${typeof tenant}:${String(tenant)}`;
    const principal = principalId(this.getAdapter(context)?.principal?.(context), handler);
    if (principal !== undefined) return `${route}\0u:${principal}`;
    if (context.getType() === 'http') {
      this.events.warnOnce(
        handler,
        "no principal (request.user) and no `scope`: every caller shares this route's records " +
          "(a caller can replay another's response). Set `scope`, or `scope: 'public'` for a public endpoint",
        'unscoped',
      );
    }
    return route;
  }

  /** Runs `onReject` for a request refused without running the handler. */
  private settleRejected(
    context: ExecutionContext,
    options: ResolvedIdempotencyOptions,
    handler: string,
    error: IdempotencyError,
  ): void {
    if (
      error.code === IdempotencyErrorCode.KeyMissing ||
      error.code === IdempotencyErrorCode.KeyInvalid
    ) {
      this.events.emit(options, 'rejected', handler, undefined, error);
    }
    try {
      options.onReject?.(context, error);
    } catch (hookError) {
      this.logger.error(`${handler}: onReject failed (${describe(hookError)})`);
    }
  }

  private async claimAndRun(
    context: ExecutionContext,
    next: CallHandler,
    adapter: IdempotencyContextAdapter,
    options: ResolvedIdempotencyOptions,
    handler: string,
  ): Promise<Observable<unknown>> {
    const raw = options.key ? options.key(context) : adapter.readKey(context, options);
    if (raw === undefined || raw === null) {
      if (options.required) throw new IdempotencyKeyMissingError(options.headerName);
      this.events.emit(options, 'bypassed', handler);
      return next.handle();
    }
    // Only the HTTP header is an RFC 8941 structured field; other keys are taken as they are.
    const header = !options.key && context.getType() === 'http';
    const key = parseIdempotencyKey(raw, options.maxKeyLength, header);
    this.serializers.check(context); // before anything runs or is stored
    const claim: RouteClaim = {
      key: recordKey(options.keyPrefix, this.getScope(context, handler, options), key),
      token: randomUUID(),
      handler,
      options,
      route: this.routes.resolve(context),
    };
    const request: ClaimRequest = {
      token: claim.token,
      fingerprint: options.fingerprint ? adapter.fingerprint(context) : '',
      leaseMs: options.lockTtl,
    };

    let result: ClaimResult;
    try {
      result = await this.calls.claim(claim, request);
    } catch (error) {
      this.events.emit(options, 'store_error', handler, claim.key, error);
      if (options.failOpen) {
        this.logger.warn(
          `${handler}: store failed (${describe(error)}); running unprotected (failOpen)`,
        );
        return next.handle();
      }
      this.logger.error(`${handler}: store failed (${describe(error)}); answering 503`);
      throw new IdempotencyStoreUnavailableError(STORE_RETRY_AFTER_MS, { cause: error });
    }
    if (result.status === 'in_progress' && options.onConflict === 'wait') {
      result = await this.waiter.wait(claim, request, result);
    }

    // An outer retry may have answered this request with an error before: drop its headers.
    if (result.status === 'completed' || result.status === 'claimed') adapter.reset?.(context);
    switch (result.status) {
      case 'completed':
        this.events.emit(options, 'replayed', handler, claim.key);
        options.onReplay?.(context);
        return this.serializers.passThrough(
          context,
          adapter.replay(context, await decodeResponse(result.response), options),
        );
      case 'in_progress':
        this.events.emit(options, 'conflict', handler, claim.key);
        throw new IdempotencyInProgressError(retryAfter(claim.route, result.retryAfterMs));
      case 'key_reused':
        this.events.emit(options, 'key_reused', handler, claim.key);
        throw new IdempotencyKeyReusedError();
    }
    this.events.emit(options, 'claimed', handler, claim.key);
    return this.run(context, next, adapter, claim);
  }

  /**
   * Runs the handler under the claim, subscribed here rather than by the caller: if the caller
   * goes away (client disconnect, a timeout interceptor), the handler still runs to its end and
   * its outcome is still recorded, so a retry never runs it a second time concurrently. Exactly
   * one of complete / release happens, and the values are passed on only after it, so the
   * response leaves after the completion write (and a stream reaches the caller once it ends).
   */
  private run(
    context: ExecutionContext,
    next: CallHandler,
    adapter: IdempotencyContextAdapter,
    claim: RouteClaim,
  ): Observable<unknown> {
    const stopHeartbeat = this.calls.heartbeat(claim);
    const started = performance.now();
    const values: unknown[] = [];
    const outcome = new Promise<unknown[]>((resolve, reject) => {
      const fail = (error: unknown) => {
        stopHeartbeat();
        timeRun(claim.route, started);
        // A timeout interceptor inside this one gave up waiting, but the handler may run on:
        // the claim stays until its lease runs out, so a retry cannot run it a second time now.
        if (isTimeout(error)) {
          this.logger.warn(
            `${claim.handler}: timed out; ${claim.key} stays claimed until its lease runs out`,
          );
          reject(error);
          return;
        }
        void this.calls.release(claim, error).then(() => reject(error));
      };
      try {
        next.handle().subscribe({
          next: (value) => values.push(value),
          error: fail,
          complete: () => {
            stopHeartbeat();
            timeRun(claim.route, started);
            void this.complete(context, adapter, claim, values).then(() => resolve(values));
          },
        });
      } catch (error) {
        fail(error);
      }
    });
    // Nobody may be listening any more when the handler fails: that must not be unhandled.
    outcome.catch(() => {});
    return new Observable((subscriber) => {
      outcome.then(
        (emitted) => {
          for (const value of emitted) subscriber.next(value);
          subscriber.complete();
        },
        (error: unknown) => {
          // What the handler emitted before failing still reaches the caller, as without us.
          for (const value of values) subscriber.next(value);
          subscriber.error(error);
        },
      );
    });
  }

  private async complete(
    context: ExecutionContext,
    adapter: IdempotencyContextAdapter,
    claim: Claim,
    values: unknown[],
  ): Promise<void> {
    const { options, handler, key } = claim;
    let encoded;
    try {
      const sent = await this.serializers.apply(context, values);
      const snapshot = adapter.capture(context, sent, options);
      if (typeof snapshot === 'string') {
        return this.notReplayable(claim, snapshot, `the response is ${snapshot}`);
      }
      encoded = encodeResponse(snapshot);
    } catch (error) {
      const reason = `the response cannot be serialised (${describe(error)})`;
      return this.notReplayable(claim, 'unserialisable', reason);
    }
    if (encoded.body.length > options.maxResponseBytes) {
      return this.notReplayable(
        claim,
        'too large',
        `the response has ${encoded.body.length} bytes, over maxResponseBytes (${options.maxResponseBytes})`,
      );
    }
    try {
      const owned = await this.calls.complete(
        claim,
        await packResponse(encoded, options.compression),
      );
      if (owned) {
        this.events.emit(options, 'completed', handler, key);
      } else {
        this.events.emit(options, 'fenced', handler, key);
        this.logger.warn(
          `${handler}: the handler outlived its lease on ${key}; its response was sent but not stored (fenced)`,
        );
      }
    } catch (error) {
      this.events.emit(options, 'completion_failed', handler, key, error);
      this.logger.error(
        `${handler}: the handler succeeded but storing its response for ${key} failed (${describe(error)}); a retry after the lease may run it again`,
      );
    }
  }

  /** `kind`: what went wrong, without the details of this response (it is warned about once). */
  private async notReplayable(claim: Claim, kind: string, reason: string): Promise<void> {
    this.events.emit(claim.options, 'not_replayable', claim.handler, claim.key);
    this.events.warnOnce(
      claim.handler,
      `not stored because ${reason}; the claim was released`,
      kind,
    );
    await this.calls.release(claim);
  }
}

/**
 * How long a duplicate is told to wait (Retry-After, RPC `retryAfterMs`): the route's mean handler
 * time in this process, at least 1 s, and never past the lease the holder has left.
 */
function retryAfter(route: Route | null, leaseLeftMs: number): number {
  return Math.min(leaseLeftMs, Math.max(MIN_RETRY_AFTER_MS, Math.ceil(route?.runMs ?? 0)));
}

/** An error of a timeout interceptor: rxjs `timeout()` or Nest's RequestTimeoutException (408). */
function isTimeout(error: unknown): boolean {
  return (
    error instanceof RequestTimeoutException ||
    (error instanceof Error && error.name === 'TimeoutError')
  );
}
