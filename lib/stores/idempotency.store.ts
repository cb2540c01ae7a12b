import type {
  ListRecordsPage,
  ListRecordsQuery,
  RecordAbout,
  RecordCounts,
} from './record-listing';

/** What a caller asks for when it claims a key. */
export interface ClaimRequest {
  /** Random owner token; only its holder may complete, release or extend the record. */
  token: string;
  /** Hash of the request; `''` disables the payload check for this claim. */
  fingerprint: string;
  /** Lease in milliseconds: how long the claim lives unless it is extended or completed. */
  leaseMs: number;
  /**
   * The caller waits for the outcome of an in-progress record (`onConflict: 'wait'`) and has
   * {@link IdempotencyStore.watch watched} the key: its completion or release must notify.
   */
  waiting?: boolean;
  /**
   * The caller resumes where an earlier run with this key stopped (option `resumable`): a claim
   * that takes the key (absent, expired or released) returns the steps recorded under it (see
   * {@link IdempotencyStore.recordStep}). Steps recorded under another fingerprint make the key
   * `key_reused`. Claims without it never read steps.
   */
  resumable?: boolean;
  /**
   * What operators list the record by (route, and the client's key and owner, opaque): kept
   * with the record and with any steps it records, for {@link IdempotencyStore.list}. A store
   * without listing ignores it.
   */
  about?: RecordAbout;
}

/**
 * A step recorded under a claim (`IdempotencyService.step()`): a recovery point of a resumable
 * handler, which a re-run of the same request returns instead of running the step again.
 */
export interface StoredStep {
  /** Its place in the handler's order of step() calls, from 0. */
  index: number;
  /** Its name, as the handler gave it. */
  name: string;
  /** Its result, encoded by the core: opaque to the store. */
  result: StoredResponse;
}

/** Options of {@link IdempotencyStore.complete}. */
export interface CompleteOptions {
  /**
   * The run recorded steps, or resumed from some (`resumable`): delete the key's steps with the
   * completion. Completions without it never touch steps.
   */
  clearSteps?: boolean;
}

/** A stored response, opaque to the store: the interceptor encodes and decodes it. */
export interface StoredResponse {
  /** Status, headers and body type, encoded by the interceptor. */
  meta: string;
  /** Response body bytes. */
  body: Buffer;
}

/**
 * What a store may hand its watchers when a record completes: the stored response and the
 * fingerprint it was stored under. A waiter with the same fingerprint replays it without claiming
 * again; any other waiter claims (and gets key_reused).
 */
export interface CompletedOutcome {
  fingerprint: string;
  response: StoredResponse;
}

/** Called by {@link IdempotencyStore.watch}; `completed` is optional (then the waiter claims). */
export type WatchListener = (completed?: CompletedOutcome) => void;

/** The outcome of {@link IdempotencyStore.claim}. */
export type ClaimResult =
  /**
   * The caller owns a fresh lease and must run the handler. `steps`: what earlier runs recorded
   * (a `resumable` claim only), in any order.
   */
  | { status: 'claimed'; steps?: StoredStep[] }
  /** Another owner holds the lease; `retryAfterMs` is the time it has left. */
  | { status: 'in_progress'; retryAfterMs: number }
  /** The key was first used with another request fingerprint. */
  | { status: 'key_reused' }
  /** The key completed earlier: replay `response`. */
  | { status: 'completed'; response: StoredResponse };

/** What {@link IdempotencyStore.inspect} reports of a record. */
export type RecordInspection =
  /**
   * No live record: never claimed, released, expired or deleted. `steps`: the steps a run that
   * crashed or was released recorded, which the next resumable run resumes after.
   */
  | { state: 'absent'; steps?: RecordedStep[] }
  /**
   * A handler holds the key; its lease runs out in `leaseMsLeft` unless renewed. `steps`: the
   * steps recorded under the key so far.
   */
  | { state: 'pending'; leaseMsLeft: number; steps?: RecordedStep[] }
  /**
   * The response is stored. `meta` is the stored meta (status, headers, body type), `bytes` the
   * stored body's size (compressed if it was), `ageMs` the time since completion, `ttlMsLeft`
   * the time until the record is forgotten. Times come from the store's clock, in ms.
   *
   * `ageMs` is `-1` when the store does not know when the record completed: a Redis record
   * written by a release of this package without `inspect()` carries no completion time (such
   * records stop appearing once the last old instance is gone and their TTL has run out).
   * Otherwise it is never negative.
   */
  | { state: 'completed'; meta: string; bytes: number; ageMs: number; ttlMsLeft: number };

/** A recorded step as operators see it: its place and name, never its result. */
export interface RecordedStep {
  index: number;
  name: string;
}

/**
 * The storage contract behind the interceptor: one record per key, every operation atomic and
 * the writes checked against the owner token (fencing). Use it as a type and as the DI token.
 *
 * Any implementation must pass the shared contract suite exported from
 * `nestjs-idempotency/testing` (`runIdempotencyStoreContract`).
 */
export abstract class IdempotencyStore {
  /**
   * Atomically: create a pending record owned by `request.token` if the key is free (absent or
   * expired), otherwise report its state. A fingerprint mismatch is reported before the record's
   * state, so it wins over in-progress and completed. A store whose client may send a command
   * again after losing its reply (ioredis does, on reconnecting) answers a claim by the pending
   * record's own token `claimed`: it is the same claim (the Redis and memory stores do).
   */
  abstract claim(key: string, request: ClaimRequest): Promise<ClaimResult>;

  /**
   * Store the response and keep it for `ttlMs`, only if `token` still owns the pending record.
   * With `options.clearSteps`, the key's recorded steps are deleted with it.
   * @returns false when the caller lost the lease (expired, released or taken over).
   */
  abstract complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean>;

  /** Delete the pending record, only if `token` still owns it. @returns whether it did. */
  abstract release(key: string, token: string): Promise<boolean>;

  /** Renew the lease to `leaseMs` from now, only if `token` still owns it. @returns whether it did. */
  abstract extend(key: string, token: string, leaseMs: number): Promise<boolean>;

  /**
   * Calls `listener` whenever the record at `key` is completed or released after a claim made
   * with `waiting: true` found it in progress (a store may notify more often). On completion it
   * may pass the stored response, which saves each waiter a round trip. Resolves once the
   * subscription is active, so nothing that happens after it is missed, with the function that
   * ends it. A store that cannot notify resolves undefined: waiting duplicates then get 409.
   */
  async watch(_key: string, _listener: WatchListener): Promise<(() => void) | undefined> {
    return undefined;
  }

  /**
   * Reports a record's state without changing it (operators, support tools). Stores that cannot
   * inspect throw.
   */
  async inspect(_key: string): Promise<RecordInspection> {
    throw new Error(`${this.constructor.name} does not support inspect()`);
  }

  /**
   * Deletes a record whatever its state and owner (operators purging a stored response or freeing
   * a stuck key), and the steps `resumable` runs recorded under the key, and notifies the key's
   * watchers, so a waiting duplicate claims it. A handler still running under a deleted claim is
   * fenced: its completion is refused.
   * @returns whether there was a live record or live steps: true also when only steps were
   * deleted (a released, failed or crashed resumable run's, whose record is gone). Stores that
   * cannot delete throw.
   */
  async delete(_key: string): Promise<boolean> {
    throw new Error(`${this.constructor.name} does not support delete()`);
  }

  /** Free resources the store created (timers, connections it owns). Never closes borrowed clients. */
  async close(): Promise<void> {}

  /**
   * Records a step's result under the claim, only if `token` still owns the pending record
   * (fencing: a run that lost its lease records nothing), and keeps it for `ttlMs`: it outlives
   * the lease and a release, so that a retry after a crash or a failure resumes after it. A step
   * recorded again at its index replaces it. Deleted with the record (`delete`) or by a
   * completion with `clearSteps`. Optional: a store without it cannot serve `resumable` handlers.
   * @returns false when the caller no longer owns the record.
   */
  recordStep?(key: string, token: string, step: StoredStep, ttlMs: number): Promise<boolean>;

  /**
   * Lists records by state, newest (or oldest) first, a page at a time, for operators
   * (`IdempotencyRecords.list()`). It never walks the whole keyspace or table: an index serves
   * it, so finding the few half-done runs among many completed records reads about as many
   * records as it returns. Optional: a store without it cannot list.
   */
  list?(query: ListRecordsQuery): Promise<ListRecordsPage>;

  /**
   * How many records each state holds under `prefix` (gauges, the operator page), with
   * `stuckAfterMs` as in {@link ListRecordsQuery}. Optional, with `list`.
   */
  countRecords?(prefix: string, stuckAfterMs?: number): Promise<RecordCounts>;

  /**
   * Marks a half-done record as reported abandoned, once: true for exactly one caller across
   * every process sharing the store, while the record is half done and its last claim ended
   * at or before `endedBefore` (ms since the epoch); false otherwise (reported already,
   * resumed, completed, deleted). A new claim of the key clears the mark. Optional, with `list`.
   */
  markAbandoned?(key: string, endedBefore: number): Promise<boolean>;

  // Optional hooks: what the module and the Terminus indicator ask of a store beyond its records,
  // so that neither knows any backend. Each is optional, for stores written before they existed
  // (and stores that `implements` this class); stores/store-hooks.ts applies the defaults.

  /**
   * What log lines call the store's backend (`'Redis'`, `'PostgreSQL'`, `'MySQL'`). Default: the
   * store's class name.
   */
  declare readonly displayName?: string;

  /**
   * Resolves true once the store can serve claims (connected; for the SQL stores, the database
   * answered and, with `ensureSchema`, the table exists), false after `timeoutMs` (milliseconds)
   * or on an error. Never rejects. The module awaits it at boot, with `storeTimeout`, for the
   * stores it builds from `redis`, `postgres` or `mysql`, and boots either way: on false it logs
   * that `displayName` is not reachable yet. A store passed as `store` is the app's to make
   * ready. Default: ready at once.
   */
  whenReady?(timeoutMs: number): Promise<boolean>;

  /**
   * Warnings about the backend's configuration, logged once at boot (after `whenReady`, for a
   * store the module built; Redis: a `maxmemory-policy` that may evict records). The module
   * bounds it by `storeTimeout` and ignores a rejection. Default: none.
   */
  bootWarnings?(): Promise<string[]>;

  /**
   * Details the Terminus indicator (`IdempotencyHealthIndicator.pingCheck`) adds to an `up`
   * result (Redis: `evictionPolicy` and `warning` when it may evict records), read beside its
   * ping and within its timeout; a rejection is ignored. Never `status`, which is the
   * indicator's. Default: none.
   */
  healthDetails?(): Promise<Record<string, unknown> | undefined>;
}

/**
 * A store that can write a completion inside the application's own database transaction (option
 * `transactional`), so that the record commits, or rolls back, with the handler's writes.
 */
export interface TransactionalIdempotencyStore extends IdempotencyStore {
  /**
   * Writes the completion through `tx`, the transaction the app's `TransactionHost`
   * (`@nestjs-cls/transactional`) exposes, passed as it is (a TypeORM `EntityManager`, a
   * node-postgres client, a Kysely or Drizzle transaction...): the store turns it into whatever
   * it writes through. Only if `token` still owns the pending record (fencing).
   * @returns false when it does not: the caller must roll the transaction back.
   */
  completeInTransaction(
    tx: unknown,
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean>;

  /**
   * {@link IdempotencyStore.recordStep} through `tx`: the step's own writes and its record
   * commit together (a `resumable` handler with `transactional`: one transaction per step).
   * @returns false when `token` no longer owns the record: the caller must roll back.
   */
  recordStepInTransaction?(
    tx: unknown,
    key: string,
    token: string,
    step: StoredStep,
    ttlMs: number,
  ): Promise<boolean>;
}
