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
 * again; any other waiter claims (and gets the mismatch).
 */
export interface CompletedOutcome {
  fingerprint: string;
  response: StoredResponse;
}

/** Called by {@link IdempotencyStore.watch}; `completed` is optional (then the waiter claims). */
export type WatchListener = (completed?: CompletedOutcome) => void;

/** The outcome of {@link IdempotencyStore.claim}. */
export type ClaimResult =
  /** The caller owns a fresh lease and must run the handler. */
  | { status: 'claimed' }
  /** Another owner holds the lease; `retryAfterMs` is the time it has left. */
  | { status: 'in_progress'; retryAfterMs: number }
  /** The key was first used with another request fingerprint. */
  | { status: 'mismatch' }
  /** The key completed earlier: replay `response`. */
  | { status: 'completed'; response: StoredResponse };

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
   * state, so it wins over in-progress and completed.
   */
  abstract claim(key: string, request: ClaimRequest): Promise<ClaimResult>;

  /**
   * Store the response and keep it for `ttlMs`, only if `token` still owns the pending record.
   * @returns false when the caller lost the lease (expired, released or taken over).
   */
  abstract complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
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

  /** Free resources the store created (timers, connections it owns). Never closes borrowed clients. */
  async close(): Promise<void> {}
}
