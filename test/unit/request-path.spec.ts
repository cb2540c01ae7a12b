import { Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Idempotent } from '../../lib/decorators/idempotent.decorator';
import { IdempotencyStoreTimeoutError } from '../../lib/errors/store-timeout.error';
import type { IdempotencyEvent } from '../../lib/interfaces/idempotency-event.interface';
import { IdempotencyInterceptor } from '../../lib/interceptors/idempotency.interceptor';
import { OutcomeEvents } from '../../lib/core/outcome-events';
import { OutcomeWaiter } from '../../lib/core/outcome-waiter';
import {
  retryAfter,
  routeIdentity,
  RouteResolver,
  type Route,
} from '../../lib/interceptors/route-resolver';
import { type Claim, StoreCalls } from '../../lib/core/store-calls';
import {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  StoredResponse,
  WatchListener,
} from '../../lib/stores/idempotency.store';
import { DEFAULT_OPTIONS, resolveModuleOptions } from '../../lib/options';

/** A deferred result a test settles by hand. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** A store whose every call the test answers (or leaves hanging); it records the calls. */
class FakeStore extends IdempotencyStore {
  readonly calls: { op: string; key: string; token?: string; waiting?: boolean }[] = [];
  claims: ReturnType<typeof deferred<ClaimResult>>[] = [];
  extendAnswer: boolean | Error = true;
  listeners: WatchListener[] = [];
  canWatch = true;

  claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    this.calls.push({ op: 'claim', key, token: request.token, waiting: request.waiting });
    const next = deferred<ClaimResult>();
    this.claims.push(next);
    return next.promise;
  }
  async complete(key: string, token: string, _response: StoredResponse): Promise<boolean> {
    this.calls.push({ op: 'complete', key, token });
    return true;
  }
  async release(key: string, token: string): Promise<boolean> {
    this.calls.push({ op: 'release', key, token });
    return true;
  }
  async extend(key: string, token: string): Promise<boolean> {
    this.calls.push({ op: 'extend', key, token });
    if (this.extendAnswer instanceof Error) throw this.extendAnswer;
    return this.extendAnswer;
  }
  override async watch(_key: string, listener: WatchListener) {
    if (!this.canWatch) return undefined;
    this.listeners.push(listener);
    return () => (this.listeners = this.listeners.filter((l) => l !== listener));
  }
}

const silent = new Logger('test');
jest.spyOn(silent, 'warn').mockImplementation(() => undefined);
jest.spyOn(silent, 'error').mockImplementation(() => undefined);

function setUp(options: Partial<typeof DEFAULT_OPTIONS> = {}) {
  const store = new FakeStore();
  const events: IdempotencyEvent[] = [];
  const outcome = new OutcomeEvents(silent);
  const calls = new StoreCalls(store, outcome, silent);
  const claim: Claim = {
    key: 'k',
    token: 'tok',
    handler: 'C.m',
    route: 'POST /m',
    options: { ...DEFAULT_OPTIONS, onEvent: (event) => events.push(event), ...options },
  };
  return { store, events, outcome, calls, claim };
}

describe('StoreCalls', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['queueMicrotask', 'nextTick'] }));
  afterEach(() => jest.useRealTimers());

  it('bounds a claim by storeTimeout, and releases a claim that lands after it', async () => {
    const { store, calls, claim, events } = setUp({ storeTimeout: 100 });
    const claiming = calls.claim(claim, { token: 'tok', fingerprint: '', leaseMs: 1000 });
    const failed = expect(claiming).rejects.toBeInstanceOf(IdempotencyStoreTimeoutError);
    jest.advanceTimersByTime(100);
    await failed;
    store.claims[0].resolve({ status: 'claimed' });
    await jest.runAllTimersAsync();
    expect(store.calls.map((c) => c.op)).toEqual(['claim', 'release']);
    expect(events.map((e) => e.type)).toEqual(['released']);
  });

  it('does not release a late answer that is not a claim', async () => {
    const { store, calls, claim } = setUp({ storeTimeout: 100 });
    const failed = expect(
      calls.claim(claim, { token: 't', fingerprint: '', leaseMs: 1 }),
    ).rejects.toThrow();
    jest.advanceTimersByTime(100);
    await failed;
    store.claims[0].resolve({ status: 'in_progress', retryAfterMs: 5 });
    await jest.runAllTimersAsync();
    expect(store.calls.map((c) => c.op)).toEqual(['claim']);
  });

  it('renews running leases every third of lockTtl from one timer, and reports a lost lease once', async () => {
    const { store, calls, claim, events } = setUp({ lockTtl: 300 });
    const stopA = calls.heartbeat(claim);
    const stopB = calls.heartbeat({ ...claim, key: 'k2' });
    expect(jest.getTimerCount()).toBe(1);
    await jest.advanceTimersByTimeAsync(100);
    expect(store.calls.filter((c) => c.op === 'extend')).toHaveLength(2);
    store.extendAnswer = false;
    await jest.advanceTimersByTimeAsync(100);
    expect(events.filter((e) => e.type === 'lease_lost')).toHaveLength(2);
    const extends_ = store.calls.filter((c) => c.op === 'extend').length;
    await jest.advanceTimersByTimeAsync(300);
    expect(store.calls.filter((c) => c.op === 'extend')).toHaveLength(extends_);
    stopA();
    stopB();
    await jest.advanceTimersByTimeAsync(100);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('stops renewing a claim once its handler settled', async () => {
    const { store, calls, claim } = setUp({ lockTtl: 300 });
    const stop = calls.heartbeat(claim);
    stop();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(store.calls).toEqual([]);
  });
});

describe('OutcomeWaiter', () => {
  it('claims again when the store notifies, and waiters of one key share a final answer', async () => {
    const { store, calls, outcome, claim } = setUp({ waitTimeout: 10_000 });
    const waiter = new OutcomeWaiter(calls, outcome, silent);
    const request = { token: 'tok', fingerprint: 'fp', leaseMs: 1000 };
    const busy = { status: 'in_progress', retryAfterMs: 60_000 } as const;
    const flush = () => new Promise(setImmediate);
    const a = waiter.wait(claim, request, busy);
    const b = waiter.wait({ ...claim, token: 'other' }, { ...request, token: 'other' }, busy);
    await flush();
    // B shares A's claim in flight; an in-progress answer is not final, so B then claims itself
    // (each marks the record it waits on).
    expect(store.claims).toHaveLength(1);
    store.claims[0].resolve(busy);
    await flush();
    expect(store.calls.filter((c) => c.op === 'claim' && c.waiting)).toHaveLength(2);
    store.claims[1].resolve(busy);
    await flush();
    // The holder completes: both wake, and share one claim for the stored response.
    store.listeners.forEach((listener) => listener());
    await flush();
    expect(store.claims).toHaveLength(3);
    const stored = { meta: '{}', body: Buffer.from('x') };
    store.claims[2].resolve({ status: 'completed', response: stored });
    await expect(Promise.all([a, b])).resolves.toEqual([
      { status: 'completed', response: stored },
      { status: 'completed', response: stored },
    ]);
    expect(store.claims).toHaveLength(3);
  });

  it('replays what the notification hands over for its fingerprint, without another claim', async () => {
    const { store, calls, outcome, claim } = setUp();
    const waiter = new OutcomeWaiter(calls, outcome, silent);
    const request = { token: 'tok', fingerprint: 'fp', leaseMs: 1000 };
    const waiting = waiter.wait(claim, request, { status: 'in_progress', retryAfterMs: 60_000 });
    await new Promise(setImmediate);
    store.claims[0].resolve({ status: 'in_progress', retryAfterMs: 60_000 });
    await new Promise(setImmediate);
    const response = { meta: '{}', body: Buffer.from('y') };
    store.listeners[0]({ fingerprint: 'fp', response });
    await expect(waiting).resolves.toEqual({ status: 'completed', response });
    expect(store.claims).toHaveLength(1);
  });

  it('answers the in-progress result at once when the store cannot notify', async () => {
    const { store, calls, outcome, claim } = setUp();
    store.canWatch = false;
    const first = { status: 'in_progress', retryAfterMs: 5 } as const;
    const waiter = new OutcomeWaiter(calls, outcome, silent);
    await expect(
      waiter.wait(claim, { token: 't', fingerprint: '', leaseMs: 1 }, first),
    ).resolves.toBe(first);
    expect(store.calls).toEqual([]);
  });
});

describe('RouteResolver', () => {
  class Payments {
    @Idempotent({ ttl: 5_000 })
    create() {}
    @Idempotent(false)
    off() {}
    plain() {}
  }
  Reflect.decorate([Idempotent({ lockTtl: 9_000 })], Payments);
  const context = (handler: keyof Payments) =>
    ({ getClass: () => Payments, getHandler: () => Payments.prototype[handler] }) as never;
  const resolver = () =>
    new RouteResolver(
      new Reflector(),
      resolveModuleOptions({ ttl: 1_000 }),
      IdempotencyInterceptor,
      true,
    );

  it('merges module < class < method options once per route, and caches them', () => {
    const routes = resolver();
    const route = routes.resolve(context('create'))!;
    expect(route.options).toMatchObject({ ttl: 5_000, lockTtl: 9_000, enabled: true });
    expect(routes.resolve(context('create'))).toBe(route);
    expect(route.name).toBe('Payments.create');
  });

  it('marks an opted-out route as such, and a class-level route covers its plain methods', () => {
    const routes = resolver();
    expect(routes.resolve(context('off'))?.options.enabled).toBe(false);
    expect(routes.resolve(context('plain'))?.options.lockTtl).toBe(9_000);
  });

  it('names a route by its registered pattern when there is one, else by its handler', () => {
    const route = { id: 'Payments.create ["x"]', suffix: ' version="2"' } as Route;
    expect(routeIdentity(undefined, route, 'POST /v1/payments', 'fallback')).toBe(
      'POST /v1/payments version="2"',
    );
    expect(routeIdentity(undefined, route, undefined, 'fallback')).toBe('Payments.create ["x"]');
    expect(routeIdentity('payments', route, 'POST /v1/payments', 'fallback')).toBe(
      'space:payments',
    );
    expect(routeIdentity(undefined, null, undefined, 'fallback')).toBe('fallback');
  });

  it('asks a duplicate to wait the route’s mean run time, at least 1 s, never past the lease', () => {
    const route = { runMs: 2_400 } as Route;
    expect(retryAfter(route, 30_000)).toBe(2_400);
    expect(retryAfter({ runMs: 10 } as Route, 30_000)).toBe(1_000);
    expect(retryAfter(route, 500)).toBe(500);
    expect(retryAfter(null, 30_000)).toBe(1_000);
  });
});
