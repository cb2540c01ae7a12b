import {
  ClaimRequest,
  ClaimResult,
  CompletedOutcome,
  CompleteOptions,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  StoredStep,
  WatchListener,
} from '../idempotency.store';
import type {
  ListRecordsPage,
  ListRecordsQuery,
  RecordAbout,
  RecordCounts,
} from '../record-listing';
import { unknownOptionProblem } from '../../options/option-names';
import { MemoryListing } from './memory-listing';
import { MemorySteps } from './memory-steps';

/** Options of {@link MemoryIdempotencyStore}. */
export interface MemoryIdempotencyStoreOptions {
  /**
   * Clock in milliseconds; tests inject a fake one. Default: `performance.now()`, a monotonic
   * clock, so that a wall-clock step (NTP, a manual change) never frees a running claim early.
   */
  now?: () => number;
  /** How often expired records are swept, in milliseconds. Default: 60 000. `0` disables it. */
  sweepIntervalMs?: number;
  /**
   * Most records kept. When full, the oldest completed records make room (a very late retry of
   * one then runs again); in-progress records are never dropped, so a store full of them fails
   * the claim (503). Default: 10 000.
   */
  maxEntries?: number;
  /**
   * Most bytes of stored responses kept (bodies, meta, fingerprints and keys, as stored). Over it,
   * the oldest completed records make room, as with `maxEntries`; a single response larger than
   * this is kept alone. In-progress records hold no response and are not counted. Default:
   * 33 554 432 (32 MiB): this store is every app's default, so it must not grow a process by
   * hundreds of MiB (300 completed 0.9 MB responses would).
   */
  maxBytes?: number;
}

/** Every name the options take: the compiler keeps the list whole. */
const OPTIONS = Object.keys({
  now: true,
  sweepIntervalMs: true,
  maxEntries: true,
  maxBytes: true,
} satisfies Record<keyof MemoryIdempotencyStoreOptions, true>);

interface MemoryRecord {
  state: 'pending' | 'completed';
  owner: string;
  fingerprint: string;
  response?: StoredResponse;
  /** Bytes counted against maxBytes (completed records only). */
  bytes: number;
  expiresAt: number;
  /** When it completed, on the store's clock (completed records only). */
  completedAt?: number;
  /** What the claim carried, for listing. */
  about?: RecordAbout;
}

/**
 * A process-local store with the same semantics as the Redis store, TTLs included, steps of
 * resumable handlers too. It is the embedded default for local runs and unit tests; it does not
 * protect several app instances, and a crash of the process loses its records and steps.
 */
export class MemoryIdempotencyStore extends IdempotencyStore {
  private readonly records = new Map<string, MemoryRecord>();
  private readonly now: () => number;
  private readonly sweeper?: NodeJS.Timeout;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  /** Bytes of the completed records held (see maxBytes). */
  private bytes = 0;
  private readonly watchers = new Map<string, Set<WatchListener>>();
  /** Steps of resumable runs, apart from the records (they outlive a release). */
  private readonly steps: MemorySteps;
  /** What lists records, and the claims it remembers past their lease (stuck, half done). */
  private readonly listing: MemoryListing;

  constructor(options: MemoryIdempotencyStoreOptions = {}) {
    super();
    const problem = unknownOptionProblem(options, OPTIONS);
    if (problem) throw new TypeError(`MemoryIdempotencyStore: ${problem}`);
    this.now = options.now ?? (() => performance.now());
    this.steps = new MemorySteps(this.now);
    this.listing = new MemoryListing(this.now, {
      record: (key) => this.live(key),
      steps: (key) => this.steps.inspect(key),
      keys: () => this.records.keys(),
    });
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxBytes = options.maxBytes ?? 32 * 1024 * 1024;
    const interval = options.sweepIntervalMs ?? 60_000;
    if (interval > 0) {
      this.sweeper = setInterval(() => this.sweep(), interval);
      this.sweeper.unref();
    }
  }

  /** Number of live records (expired ones are not counted). */
  get size(): number {
    this.sweep();
    return this.records.size;
  }

  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const record = this.live(key);
    if (!record) {
      const steps = request.resumable ? this.steps.resume(key, request.fingerprint) : undefined;
      if (steps === 'key_reused') return { status: 'key_reused' };
      this.makeRoom();
      this.records.set(key, {
        state: 'pending',
        owner: request.token,
        fingerprint: request.fingerprint,
        bytes: 0,
        expiresAt: this.now() + request.leaseMs,
        about: request.about,
      });
      this.listing.claimed(key, request.about, request.leaseMs);
      return steps ? { status: 'claimed', steps } : { status: 'claimed' };
    }
    if (request.fingerprint && record.fingerprint && record.fingerprint !== request.fingerprint) {
      return { status: 'key_reused' };
    }
    if (record.state === 'completed') {
      return { status: 'completed', response: record.response! };
    }
    if (record.owner === request.token) {
      // The same claim again, as the Redis store answers a claim its client sent twice.
      const steps = request.resumable ? this.steps.resume(key, request.fingerprint) : undefined;
      return steps && steps !== 'key_reused' ? { status: 'claimed', steps } : { status: 'claimed' };
    }
    return { status: 'in_progress', retryAfterMs: record.expiresAt - this.now() };
  }

  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const record = this.owned(key, token);
    if (!record) return false;
    if (options?.clearSteps) this.steps.delete(key);
    this.listing.forget(key);
    record.state = 'completed';
    // Eviction goes by completion order: a slow request claimed first and completed last is the
    // newest response, not the oldest (Map order is insertion order).
    this.records.delete(key);
    this.records.set(key, record);
    // Copy the body: the caller's buffer may be reused or mutated after the call.
    record.response = { meta: response.meta, body: Buffer.from(response.body) };
    record.completedAt = this.now();
    record.expiresAt = record.completedAt + ttlMs;
    record.bytes =
      key.length +
      record.fingerprint.length +
      Buffer.byteLength(response.meta) +
      response.body.length;
    this.bytes += record.bytes;
    this.trim(record);
    this.notify(key, { fingerprint: record.fingerprint, response: record.response });
    return true;
  }

  async release(key: string, token: string): Promise<boolean> {
    if (!this.owned(key, token)) return false;
    this.drop(key);
    this.listing.released(key);
    this.notify(key);
    return true;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const record = this.owned(key, token);
    if (!record) return false;
    record.expiresAt = this.now() + leaseMs;
    this.listing.extended(key, leaseMs);
    return true;
  }

  override async recordStep(
    key: string,
    token: string,
    step: StoredStep,
    ttlMs: number,
  ): Promise<boolean> {
    const record = this.owned(key, token);
    if (!record) return false;
    this.steps.record(key, record.fingerprint, step, ttlMs);
    return true;
  }

  override async inspect(key: string): Promise<RecordInspection> {
    const record = this.live(key);
    const steps = record?.state === 'completed' ? undefined : this.steps.inspect(key);
    if (!record) return steps ? { state: 'absent', steps } : { state: 'absent' };
    const now = this.now();
    if (record.state === 'pending') {
      const leaseMsLeft = record.expiresAt - now;
      return steps ? { state: 'pending', leaseMsLeft, steps } : { state: 'pending', leaseMsLeft };
    }
    return {
      state: 'completed',
      meta: record.response!.meta,
      bytes: record.response!.body.length,
      ageMs: now - record.completedAt!,
      ttlMsLeft: record.expiresAt - now,
    };
  }

  override async delete(key: string): Promise<boolean> {
    // A record's steps go with it; a released or expired record's too, on their own.
    const steps = this.steps.delete(key);
    this.listing.forget(key);
    if (!this.live(key)) return steps;
    this.drop(key);
    // Waiters claim again; the owner of a deleted claim is fenced, as after an expiry.
    this.notify(key);
    return true;
  }

  /** Lists completed records among the records, the others among the claims it remembers. */
  override async list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    return this.listing.list(query);
  }

  override async countRecords(prefix: string, stuckAfterMs?: number): Promise<RecordCounts> {
    return this.listing.count(prefix, stuckAfterMs);
  }

  override async markAbandoned(key: string, endedBefore: number): Promise<boolean> {
    return this.listing.markAbandoned(key, endedBefore);
  }

  override async watch(key: string, listener: WatchListener): Promise<() => void> {
    let listeners = this.watchers.get(key);
    if (!listeners) this.watchers.set(key, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.watchers.get(key) === listeners) this.watchers.delete(key);
    };
  }

  override async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.records.clear();
    this.steps.clear();
    this.listing.clear();
    this.bytes = 0;
    this.watchers.clear();
  }

  /** Tells the key's watchers, after the current call returns, that its record changed. */
  private notify(key: string, completed?: CompletedOutcome): void {
    const listeners = this.watchers.get(key);
    if (listeners) queueMicrotask(() => listeners.forEach((listener) => listener(completed)));
  }

  private live(key: string): MemoryRecord | undefined {
    const record = this.records.get(key);
    if (record && record.expiresAt <= this.now()) {
      this.drop(key);
      return undefined;
    }
    return record;
  }

  private owned(key: string, token: string): MemoryRecord | undefined {
    const record = this.live(key);
    return record?.state === 'pending' && record.owner === token ? record : undefined;
  }

  private makeRoom(): void {
    if (this.records.size < this.maxEntries) return;
    this.sweep();
    // Map order is insertion order: the first completed records are the oldest.
    for (const [key, record] of this.records) {
      if (this.records.size < this.maxEntries) return;
      if (record.state === 'completed') this.drop(key);
    }
    if (this.records.size >= this.maxEntries) {
      throw new Error(`MemoryIdempotencyStore is full: ${this.maxEntries} requests in progress`);
    }
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, record] of this.records) {
      if (record.expiresAt <= now) this.drop(key);
    }
    this.steps.sweep();
    this.listing.sweep();
  }

  /** Drops the oldest completed records but `kept` while the responses exceed maxBytes. */
  private trim(kept: MemoryRecord): void {
    if (this.bytes <= this.maxBytes) return;
    // Map order is insertion order: the first completed records are the oldest.
    for (const [key, record] of this.records) {
      if (this.bytes <= this.maxBytes) return;
      if (record.state === 'completed' && record !== kept) this.drop(key);
    }
  }

  private drop(key: string): void {
    this.bytes -= this.records.get(key)?.bytes ?? 0;
    this.records.delete(key);
  }
}
