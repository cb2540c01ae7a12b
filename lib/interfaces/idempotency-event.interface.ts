import type { IdempotencyRecordListItem } from '../services/record-list';

/** Every outcome the interceptor reports through `onEvent`. */
export type IdempotencyEventType =
  /** The request claimed its key and the handler runs. */
  | 'claimed'
  /** The handler succeeded and its response is stored. */
  | 'completed'
  /** A stored response was replayed; the handler did not run. */
  | 'replayed'
  /** Another request with the key is in progress (409). */
  | 'conflict'
  /**
   * Another request with the key is in progress and this one waits for its outcome
   * (`onConflict: 'wait'`); `replayed`, `claimed` or `conflict` follows.
   */
  | 'waiting'
  /** The key was reused with another payload (422). */
  | 'key_reused'
  /**
   * The handler failed (or its response cannot be stored) and the claim was given up; or a claim
   * whose reply was lost (timed out or failed after reaching the store) was given up.
   */
  | 'released'
  /** The completion was refused because this request no longer owned the key. */
  | 'fenced'
  /** The heartbeat found the lease gone while the handler was still running. */
  | 'lease_lost'
  /** The request had no key and ran unprotected. */
  | 'bypassed'
  /** The request had no key (with `required`) or an invalid one, and was refused (400). */
  | 'rejected'
  /** The response could not be stored (stream, file, `@Res()`, too large). */
  | 'not_replayable'
  /**
   * The store failed before the claim (503, or run unprotected with `failOpen`), or while a
   * step's result was being recorded (the request fails with 503).
   */
  | 'store_error'
  /** The handler succeeded but storing its response failed: a retry may run it again. */
  | 'completion_failed'
  /** A step of a `resumable` handler ran and its result is recorded under the claim. */
  | 'step_recorded'
  /**
   * A step of a `resumable` handler was recorded by an earlier run of the request: its recorded
   * result was returned, and the step did not run again.
   */
  | 'step_replayed'
  /**
   * A half-done `resumable` run (steps recorded, never completed, no claim holding its key) was
   * not resumed within `abandonedAfter`: reported once across every process sharing the store,
   * with the run in `record`. Not tied to a request: `handler` is the route.
   */
  | 'abandoned';

/** Payload of `onEvent`. */
export interface IdempotencyEvent {
  type: IdempotencyEventType;
  /** The store key of the record: prefix plus a hash; never the client's raw key. */
  key?: string;
  /** `Controller.method` of the route. */
  handler: string;
  /**
   * The route's identity in record keys: `POST /v1/users` (method and path as registered, plus
   * ` version=…` / ` host=…` when set), `space:<name>` for a `keySpace`, or for a microservice
   * handler `Controller.method` and its patterns. What `IdempotencyRecords` takes as `route`.
   */
  route: string;
  /** The error behind `store_error`, `completion_failed`, `rejected` and `released` (when the handler threw). */
  error?: unknown;
  /**
   * `abandoned`: the run as `IdempotencyRecords.list()` lists it: the client's key as sent, its
   * owner (`user` or `tenant`), its steps, its age; pass it to `IdempotencyRecords.inspect()`
   * or `delete()` as it is.
   */
  record?: IdempotencyRecordListItem;
}
