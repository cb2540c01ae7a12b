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
import { IdempotentOptions } from '../decorators/idempotent-options.metadata';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  IdempotencyInProgressError,
  IdempotencyKeyMissingError,
  IdempotencyMismatchError,
  IdempotencyStoreTimeoutError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import type { IdempotencyEventType } from '../interfaces/idempotency-event.interface';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-options.interface';
import {
  createOpenTelemetryMetrics,
  IdempotencyMetrics,
  IdempotencyStoreOperation,
} from '../observability/metrics';
import {
  ClaimRequest,
  ClaimResult,
  CompletedOutcome,
  IdempotencyStore,
} from '../stores/idempotency.store';
import { parseIdempotencyKey, recordKey } from '../utils/key';
import { mergeOptions, type ResolvedModuleOptions } from '../utils/options';
import { principalId } from '../utils/principal';
import { decodeResponse, encodeResponse, packResponse } from '../utils/response-codec';
import { GlobalSerializers } from './serializers';

/** How long a client is told to wait after a store outage, in ms (Retry-After on 503). */
const STORE_RETRY_AFTER_MS = 1_000;
/** The shortest wait a 409 asks for, in ms (HTTP's Retry-After counts whole seconds). */
const MIN_RETRY_AFTER_MS = 1_000;
/** Weight of the newest run in a route's mean handler time (an exponential moving average). */
const RUN_TIME_WEIGHT = 0.2;

/** Requests (their contexts) an idempotency interceptor is handling (see `intercept`). */
const handling = new WeakSet<ExecutionContext>();

/** Nest's metadata key of `@UseInterceptors()` bindings (Nest 10-12). */
const INTERCEPTORS_METADATA = '__interceptors__';

/** Nest's metadata that tells routes apart: path, version, microservice pattern (Nest 10-12). */
const ROUTE_METADATA = ['path', '__version__', 'microservices:pattern'];

/** What the interceptor works out once per route. */
interface Route {
  options: ResolvedIdempotencyOptions;
  /** `Controller.method`, for logs and events. */
  name: string;
  /** What tells this route apart from every other: name, path, version, pattern. */
  id: string;
  /** A subclass of this interceptor is bound to the route as well, and handles its requests. */
  subclassBound: boolean;
  /** Mean time its handler takes in this process, in ms (moving average); 0 before a first run. */
  runMs: number;
}

/** One request's claim, as the interceptor tracks it while the handler runs. */
interface Claim {
  key: string;
  token: string;
  handler: string;
  options: ResolvedIdempotencyOptions;
  /** The cached route, when the route has one (a subclass may make others idempotent). */
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
  /** Per controller class and handler: what never changes between requests, worked out once. */
  private readonly routes = new WeakMap<object, WeakMap<object, Route | null>>();
  private readonly adapters: Partial<Record<ContextType, IdempotencyContextAdapter>>;
  private readonly warned = new Set<string>();
  private readonly metrics?: IdempotencyMetrics;
  /** Waiters' claims in flight, per key and fingerprint (see {@link recheck}). */
  private readonly rechecks = new Map<string, Promise<ClaimResult>>();
  private readonly serializers: GlobalSerializers;

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
    if (options.metrics !== false) this.metrics = createOpenTelemetryMetrics();
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    // Another idempotency interceptor may wrap the same request: a subclass registered globally
    // or bound to the route, or `globalInterceptor: true`. One handles it: a subclass bound to
    // the route wins over this class, else the first to run. It marks the context (Nest hands
    // every interceptor of a request the same one) while it handles the request, so an outer
    // interceptor that subscribes again (a retry) goes through the claim again.
    const route = this.route(context);
    if (handling.has(context) || route?.subclassBound) return next.handle();
    const options = this.getRouteOptions(context);
    if (!options) return next.handle();
    const adapter = this.getAdapter(context);
    const handler = route?.name ?? routeName(context);
    const unsupported = adapter
      ? adapter.unsupported(context)
      : `${context.getType()} handlers are not supported yet`;
    if (!adapter || unsupported) {
      this.warnOnce(handler, `@Idempotent() has no effect here: ${unsupported}`);
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
    return this.route(context)?.options;
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
    const route = this.route(context)?.id ?? routeName(context);
    const { scope } = options;
    if (scope === 'public') return route;
    // A tenant, typed (`1` and `'1'` differ); none (undefined, null) falls back to the principal.
    const tenant: unknown = scope?.(context);
    if (tenant !== undefined && tenant !== null)
      return `${route}\0t:${typeof tenant}:${String(tenant)}`;
    const principal = principalId(this.getAdapter(context)?.principal?.(context), handler);
    if (principal !== undefined) return `${route}\0u:${principal}`;
    if (context.getType() === 'http') {
      this.warnOnce(
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
      this.emit(options, 'rejected', handler, undefined, error);
    }
    try {
      options.onReject?.(context, error);
    } catch (hookError) {
      this.logger.error(`${handler}: onReject failed (${describe(hookError)})`);
    }
  }

  /** The cached facts of an `@Idempotent()` route, or null for any other route. */
  private route(context: ExecutionContext): Route | null {
    const target = context.getClass();
    const handler = context.getHandler();
    let perClass = this.routes.get(target);
    if (!perClass) this.routes.set(target, (perClass = new WeakMap()));
    let route = perClass.get(handler);
    if (route === undefined) {
      const onClass = this.reflector.get(IdempotentOptions, target);
      const onMethod = this.reflector.get(IdempotentOptions, handler);
      const name = routeName(context);
      const metadata = ROUTE_METADATA.map((key) => [
        Reflect.getMetadata(key, target),
        Reflect.getMetadata(key, handler),
      ]);
      route =
        onClass || onMethod
          ? {
              options: mergeOptions(
                this.options,
                isEventHandler(handler) ? this.options.eventDefaults : undefined,
                onClass,
                onMethod,
              ),
              name,
              id: JSON.stringify([name, metadata]),
              subclassBound:
                this.constructor === IdempotencyInterceptor && bindsSubclass(target, handler),
              runMs: 0,
            }
          : null;
      perClass.set(handler, route);
    }
    return route;
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
      this.emit(options, 'bypassed', handler);
      return next.handle();
    }
    // Only the HTTP header is an RFC 8941 structured field; other keys are taken as they are.
    const header = !options.key && context.getType() === 'http';
    const key = parseIdempotencyKey(raw, options.maxKeyLength, header);
    this.serializers.check(context); // before anything runs or is stored
    const claim: Claim = {
      key: recordKey(options.keyPrefix, this.getScope(context, handler, options), key),
      token: randomUUID(),
      handler,
      options,
      route: this.route(context),
    };
    const request: ClaimRequest = {
      token: claim.token,
      fingerprint: options.fingerprint ? adapter.fingerprint(context) : '',
      leaseMs: options.lockTtl,
    };

    let result: ClaimResult;
    try {
      result = await this.claim(claim, request);
    } catch (error) {
      this.emit(options, 'store_error', handler, claim.key, error);
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
      result = await this.waitForOutcome(claim, request, result);
    }

    // An outer retry may have answered this request with an error before: drop its headers.
    if (result.status === 'completed' || result.status === 'claimed') adapter.reset?.(context);
    switch (result.status) {
      case 'completed':
        this.emit(options, 'replayed', handler, claim.key);
        options.onReplay?.(context);
        return this.serializers.passThrough(
          context,
          adapter.replay(context, await decodeResponse(result.response), options),
        );
      case 'in_progress':
        this.emit(options, 'conflict', handler, claim.key);
        throw new IdempotencyInProgressError(retryAfter(claim.route, result.retryAfterMs));
      case 'mismatch':
        this.emit(options, 'mismatch', handler, claim.key);
        throw new IdempotencyMismatchError();
    }
    this.emit(options, 'claimed', handler, claim.key);
    return this.run(context, next, adapter, claim);
  }

  /**
   * One claim, bounded by storeTimeout. A claim that timed out may still reach the store later
   * (queued while Redis was connecting or stalled): if it then claims the key, nobody runs the
   * handler, so it is released at once instead of staying pending for lockTtl.
   */
  private async claim(claim: Claim, request: ClaimRequest): Promise<ClaimResult> {
    const claiming = this.store.claim(claim.key, request);
    try {
      return await this.call('claim', claiming, claim.options);
    } catch (error) {
      if (error instanceof IdempotencyStoreTimeoutError) {
        claiming.then(
          (late) => (late.status === 'claimed' ? this.release(claim, error) : undefined),
          () => {},
        );
      }
      throw error;
    }
  }

  /**
   * A waiter's claim, with the `waiting` flag so that the outcome is published. The waiters of one
   * key and payload in this process share a claim in flight, so that one notification costs one
   * store round trip, not one per waiter. Only a final outcome (completed, mismatch) is shared:
   * on any other answer each waiter claims for itself, so that only one of them takes a freed key
   * and each marks the record it waits on.
   */
  private async recheck(claim: Claim, request: ClaimRequest): Promise<ClaimResult> {
    const id = `${claim.key}\0${request.fingerprint}`;
    const shared = this.rechecks.get(id);
    if (shared) {
      const result = await shared;
      if (result.status === 'completed' || result.status === 'mismatch') return result;
    }
    const own = this.claim(claim, { ...request, waiting: true });
    this.rechecks.set(id, own);
    try {
      return await own;
    } finally {
      if (this.rechecks.get(id) === own) this.rechecks.delete(id);
    }
  }

  /**
   * `onConflict: 'wait'`: holds a duplicate until the request that holds its key completes or
   * fails, then claims again, which replays the stored response, or claims the key when the first
   * request failed or its lease ran out (a crashed holder). Never polls: it claims again only
   * when the store notifies it or when the holder's lease runs out. After `waitTimeout`, or when
   * the store cannot notify, it returns the in-progress result (409).
   */
  private async waitForOutcome(
    claim: Claim,
    request: ClaimRequest,
    first: ClaimResult & { status: 'in_progress' },
  ): Promise<ClaimResult> {
    const { options, handler, key } = claim;
    const deadline = performance.now() + options.waitTimeout;
    let wake!: (completed?: CompletedOutcome) => void;
    let woken = new Promise<CompletedOutcome | undefined>((resolve) => (wake = resolve));
    const watching = this.store.watch(key, (completed) => wake(completed));
    let unwatch: (() => void) | undefined;
    try {
      unwatch = await this.call('watch', watching, options);
    } catch (error) {
      // It may still subscribe later: end that subscription then.
      watching.then(
        (late) => late?.(),
        () => {},
      );
      this.logger.warn(`${handler}: cannot wait on ${key} (${describe(error)}); answering 409`);
    }
    if (!unwatch) return first;
    this.emit(options, 'waiting', handler, key);
    let result: ClaimResult = first;
    try {
      for (;;) {
        // Claimed again after watching, so an outcome between the two calls is not missed.
        result = await this.recheck(claim, request);
        const left = deadline - performance.now();
        if (result.status !== 'in_progress' || left <= 0) return result;
        const completed = await wakeOrTimeout(woken, Math.min(left, result.retryAfterMs + 1));
        woken = new Promise((resolve) => (wake = resolve));
        // The store handed over the response, stored for this very payload: no claim needed.
        if (completed && completed.fingerprint === request.fingerprint) {
          return { status: 'completed', response: completed.response };
        }
      }
    } catch (error) {
      this.emit(options, 'store_error', handler, key, error);
      this.logger.warn(`${handler}: waiting on ${key} failed (${describe(error)}); answering 409`);
      return result;
    } finally {
      unwatch();
    }
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
    claim: Claim,
  ): Observable<unknown> {
    const stopHeartbeat = this.startHeartbeat(claim);
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
        void this.release(claim, error).then(() => reject(error));
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
      const stored = await packResponse(encoded, options.compression);
      const owned = await this.call(
        'complete',
        this.store.complete(key, claim.token, stored, options.ttl),
        options,
      );
      if (owned) {
        this.emit(options, 'completed', handler, key);
      } else {
        this.emit(options, 'fenced', handler, key);
        this.logger.warn(
          `${handler}: the handler outlived its lease on ${key}; its response was sent but not stored (fenced)`,
        );
      }
    } catch (error) {
      this.emit(options, 'completion_failed', handler, key, error);
      this.logger.error(
        `${handler}: the handler succeeded but storing its response for ${key} failed (${describe(error)}); a retry after the lease may run it again`,
      );
    }
  }

  /** `kind`: what went wrong, without the details of this response (it is warned about once). */
  private async notReplayable(claim: Claim, kind: string, reason: string): Promise<void> {
    this.emit(claim.options, 'not_replayable', claim.handler, claim.key);
    this.warnOnce(claim.handler, `not stored because ${reason}; the claim was released`, kind);
    await this.release(claim);
  }

  private async release(claim: Claim, cause?: unknown): Promise<void> {
    try {
      await this.call('release', this.store.release(claim.key, claim.token), claim.options);
      this.emit(claim.options, 'released', claim.handler, claim.key, cause);
    } catch (error) {
      this.logger.error(
        `${claim.handler}: releasing ${claim.key} failed (${describe(error)}); it frees itself when the lease expires`,
      );
    }
  }

  /** Renews the lease every third of lockTtl while the handler runs. Returns the stop function. */
  private startHeartbeat(claim: Claim): () => void {
    const { options } = claim;
    const timer = setInterval(
      () => {
        this.call(
          'extend',
          this.store.extend(claim.key, claim.token, options.lockTtl),
          options,
        ).then(
          (owned) => {
            if (owned) return;
            clearInterval(timer);
            this.emit(options, 'lease_lost', claim.handler, claim.key);
            this.logger.warn(`${claim.handler}: lost the lease on ${claim.key} while running`);
          },
          (error) =>
            this.logger.warn(`${claim.handler}: renewing ${claim.key} failed (${describe(error)})`),
        );
      },
      Math.max(1, Math.floor(options.lockTtl / 3)),
    );
    timer.unref();
    return () => clearInterval(timer);
  }

  /** A store call bounded by storeTimeout, so a hung store cannot hang a request. */
  private call<T>(
    operation: IdempotencyStoreOperation,
    promise: Promise<T>,
    options: ResolvedIdempotencyOptions,
  ): Promise<T> {
    const started = this.metrics ? performance.now() : 0;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      /** Records the first outcome only: a call that timed out may still answer later. */
      const settle = (failed: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.metrics?.storeLatency(operation, performance.now() - started, failed);
      };
      const timer = setTimeout(() => {
        settle(true);
        reject(new IdempotencyStoreTimeoutError(operation, options.storeTimeout));
      }, options.storeTimeout);
      promise.then(
        (value) => {
          settle(false);
          resolve(value);
        },
        (error: unknown) => {
          settle(true);
          reject(error);
        },
      );
    });
  }

  private emit(
    options: ResolvedIdempotencyOptions,
    type: IdempotencyEventType,
    handler: string,
    key?: string,
    error?: unknown,
  ): void {
    this.metrics?.outcome(type, handler);
    if (!options.onEvent) return;
    try {
      options.onEvent({ type, handler, key, error });
    } catch (listenerError) {
      this.logger.error(`onEvent listener threw (${describe(listenerError)})`);
    }
  }

  /**
   * Logs a warning the first time `kind` happens on a handler. Kinds are few per handler, so the
   * set stays small; messages (with sizes or error texts) would grow it without bound.
   */
  private warnOnce(handler: string, message: string, kind = message): void {
    const id = `${handler}\0${kind}`;
    if (this.warned.has(id)) return;
    this.warned.add(id);
    this.logger.warn(`${handler}: ${message}`);
  }
}

/**
 * How long a duplicate is told to wait (Retry-After, RPC `retryAfterMs`): the route's mean handler
 * time in this process, at least 1 s, and never past the lease the holder has left.
 */
function retryAfter(route: Route | null, leaseLeftMs: number): number {
  return Math.min(leaseLeftMs, Math.max(MIN_RETRY_AFTER_MS, Math.ceil(route?.runMs ?? 0)));
}

/** Adds one run of the handler to its route's mean handler time. */
function timeRun(route: Route | null, started: number): void {
  if (!route) return;
  const ms = performance.now() - started;
  route.runMs = route.runMs === 0 ? ms : route.runMs + (ms - route.runMs) * RUN_TIME_WEIGHT;
}

/** What `woken` resolves with, or undefined after `ms`, whichever is first. */
async function wakeOrTimeout<T>(woken: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>(
    (resolve) => (timer = setTimeout(() => resolve(undefined), ms)),
  );
  try {
    return await Promise.race([woken, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `@UseInterceptors()` on the class or the handler binds a subclass of the interceptor. */
function bindsSubclass(target: object, handler: object): boolean {
  const bound: unknown[] = [
    ...((Reflect.getMetadata(INTERCEPTORS_METADATA, target) as unknown[] | undefined) ?? []),
    ...((Reflect.getMetadata(INTERCEPTORS_METADATA, handler) as unknown[] | undefined) ?? []),
  ];
  return bound.some((interceptor) =>
    typeof interceptor === 'function'
      ? interceptor.prototype instanceof IdempotencyInterceptor
      : interceptor instanceof IdempotencyInterceptor &&
        interceptor.constructor !== IdempotencyInterceptor,
  );
}

/** An error of a timeout interceptor: rxjs `timeout()` or Nest's RequestTimeoutException (408). */
function isTimeout(error: unknown): boolean {
  return (
    error instanceof RequestTimeoutException ||
    (error instanceof Error && error.name === 'TimeoutError')
  );
}

/** Nest's marker of `@EventPattern` handlers (PatternHandler.EVENT under 'microservices:handler_type'). */
function isEventHandler(handler: object): boolean {
  return Reflect.getMetadata('microservices:handler_type', handler) === 2;
}

function routeName(context: ExecutionContext): string {
  return `${context.getClass().name}.${context.getHandler().name}`;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
