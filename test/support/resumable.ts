import { HttpException } from '@nestjs/common';
import {
  ClaimRequest,
  ClaimResult,
  CompleteOptions,
  MemoryIdempotencyStore,
  type MemoryIdempotencyStoreOptions,
  StoredResponse,
  StoredStep,
} from '../../lib';
import { deferred } from './test-app';

/** The four steps of the order handler, in order. */
export const ORDER_STEPS = ['order', 'charge', 'email', 'event'] as const;
export type OrderStep = (typeof ORDER_STEPS)[number];

/**
 * The outside world of a resumable handler, counted apart from the module: an orders table, a
 * payment provider that deduplicates by key, a mail sink that does not, an event bus. A test can
 * make a step fail once (before its effect) or hold a step until it lets it go.
 */
export class World {
  /** Calls of each step's function (not of its recorded result), by step name. */
  readonly attempts = new Map<string, number>();
  /** Effects that happened, by step name (an e-mail sent, a row inserted...). */
  readonly effects = new Map<string, number>();
  /** Every charge call's provider key, in order; the provider charges once per key. */
  readonly chargeKeys: string[] = [];
  /** The steps of a handler whose steps the test names (its code, as deploys change it). */
  names: string[] = [];
  /** What `derivedIdempotencyKey(label)` gave in each step's calls, in order. */
  readonly derived: { step: string; key: string }[] = [];
  private readonly charges = new Map<string, string>();
  private seq = 0;
  private failing?: string;
  private holding?: { step: string; reached: () => void; gate: Promise<void> };

  /** The next call of `step`'s function throws a 502 before its effect. */
  failNext(step: string): void {
    this.failing = step;
  }

  /**
   * Holds the next call of `step`'s function before its effect. Resolves `reached` once it is
   * held; `release()` lets it go on.
   */
  hold(step: string): { reached: Promise<void>; release: () => void } {
    const reached = deferred();
    const gate = deferred();
    this.holding = { step, reached: reached.resolve, gate: gate.promise };
    return { reached: reached.promise, release: gate.resolve };
  }

  count(map: 'attempts' | 'effects', step: string): number {
    return this[map].get(step) ?? 0;
  }

  /** A step's function: counts the call, derives `label` in it, fails or holds when asked. */
  async enter(step: string, derive?: () => string): Promise<void> {
    this.attempts.set(step, this.count('attempts', step) + 1);
    if (derive) this.derived.push({ step, key: derive() });
    if (this.holding?.step === step) {
      const { reached, gate } = this.holding;
      this.holding = undefined;
      reached();
      await gate;
    }
    if (this.failing === step) {
      this.failing = undefined;
      throw new HttpException(`${step} failed`, 502);
    }
  }

  effect(step: string): void {
    this.effects.set(step, this.count('effects', step) + 1);
  }

  /** Inserts an order row: a new id each time it runs. */
  insertOrder(item: string): { id: string; item: string; placedAt: Date } {
    this.effect('order');
    return {
      id: `order-${++this.seq}`,
      item,
      placedAt: new Date(Date.UTC(2026, 10, 26, 9, this.seq)),
    };
  }

  /** Charges at a provider that deduplicates by key: a second call with a key returns the first charge. */
  charge(key: string): { id: string; amount: bigint } {
    this.chargeKeys.push(key);
    let id = this.charges.get(key);
    if (!id) {
      this.effect('charge');
      this.charges.set(key, (id = `ch_${this.charges.size + 1}`));
    }
    return { id, amount: 1999n };
  }
}

/** One call a {@link CountingStore} got, as the tests compare them. */
export type StoreCall =
  | { op: 'claim'; resumable: boolean; request: ClaimRequest }
  | { op: 'complete'; args: number; options?: CompleteOptions }
  | { op: 'recordStep'; step: { index: number; name: string } }
  | { op: 'release' };

/**
 * The memory store, with every call it gets written down: what a route or run() asks of the
 * store, to show what a resumable run costs and that other runs cost what they did.
 */
export class CountingStore extends MemoryIdempotencyStore {
  readonly calls: StoreCall[] = [];

  constructor(options?: MemoryIdempotencyStoreOptions) {
    super(options);
  }

  override claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    this.calls.push({ op: 'claim', resumable: 'resumable' in request, request });
    return super.claim(key, request);
  }

  override complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    ...rest: [CompleteOptions?]
  ): Promise<boolean> {
    this.calls.push({ op: 'complete', args: 4 + rest.length, options: rest[0] });
    return super.complete(key, token, response, ttlMs, ...rest);
  }

  override recordStep(key: string, token: string, step: StoredStep, ttlMs: number) {
    this.calls.push({ op: 'recordStep', step: { index: step.index, name: step.name } });
    return super.recordStep(key, token, step, ttlMs);
  }

  override release(key: string, token: string): Promise<boolean> {
    this.calls.push({ op: 'release' });
    return super.release(key, token);
  }

  /** The calls since the last time they were taken. */
  take(): StoreCall[] {
    return this.calls.splice(0);
  }
}
