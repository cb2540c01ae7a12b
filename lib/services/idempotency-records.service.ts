import {
  BadRequestException,
  Inject,
  Injectable,
  Logger,
  ServiceUnavailableException,
} from '@nestjs/common';
import { describe } from '../core/outcome-events';
import { replayCacheOf } from '../core/replay-cache';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import { IdempotencyStore } from '../stores/idempotency.store';
import { recordKey, recordScope, RUN_SPACE, runKeyText } from '../core/record-key';
import { parseIdempotencyKey } from '../utils/key';
import type { ResolvedModuleOptions } from '../options';
import { principalId, tenantId } from '../utils/principal';
import { describeMeta } from '../utils/response-codec';
import { withTimeout } from '../utils/timeout';

/** Which record an operator means: the client's key, the route, and whose record it is. */
export interface IdempotencyRecordQuery {
  /**
   * The key as the route read it: the `Idempotency-Key` header's value (the content of a quoted
   * one), what a `key` function returned, or the message's key.
   */
  key: string | number | bigint;
  /**
   * The route, as events name it (`IdempotencyEvent.route`): `POST /v1/payments` (method and
   * path as registered, with ` version=…` / ` host=…` when set), `space:<name>` for a route with a
   * `keySpace`, or for a microservice handler `Controller.method` and its patterns.
   */
  route: string;
  /**
   * Whose record, on a route scoped to its principal: the principal as your auth sets
   * `request.user` (e.g. `{ id: 42 }`; its `id`, `sub`, `userId` or `_id` is what counts).
   */
  user?: unknown;
  /** Whose record, on a route with a `scope` function: what it returned for the caller. */
  tenant?: unknown;
  /** The route's `keyPrefix`, when it overrides the module's. */
  keyPrefix?: string;
}

/** A step a `resumable` handler recorded under a key: its place in the order of steps, and name. */
export interface IdempotencyRecordStep {
  index: number;
  name: string;
}

/** A record as {@link IdempotencyRecords.inspect} reports it. */
export type IdempotencyRecordState =
  /**
   * No live record: never used, released, expired or deleted. `steps`: the steps a `resumable`
   * run recorded before it failed, crashed or was released, after which the next run resumes
   * (absent when there are none).
   */
  | { state: 'absent'; steps?: IdempotencyRecordStep[] }
  /**
   * A handler runs under the key; its lease runs out in `leaseMsLeft` ms unless renewed.
   * `steps`: the steps of a `resumable` handler recorded so far, by this run or earlier ones
   * (absent when there are none): where a stuck run is.
   */
  | { state: 'pending'; leaseMsLeft: number; steps?: IdempotencyRecordStep[] }
  /**
   * The outcome is stored: its HTTP `status` (none for RPC), whether it is a stored `error`
   * (`storeErrors`), the stored body's size in `bytes` (compressed if it was), the ms since it
   * completed (`ageMs`, -1 when unknown) and until it is forgotten (`ttlMsLeft`).
   */
  | {
      state: 'completed';
      status?: number;
      error: boolean;
      bytes: number;
      ageMs: number;
      ttlMsLeft: number;
    };

/**
 * Reads and deletes idempotency records, for operators and support tools: a client whose key is
 * stuck, a stored response that must be purged. It addresses a record the way the interceptor
 * does (key, route, owner) and works on every store that implements `inspect` and `delete`
 * (memory, Redis, PostgreSQL). Expose it only behind your own authorisation.
 *
 * @example
 * ```ts
 * const state = await records.inspect({ key: 'k-1', route: 'POST /payments', user: { id: 42 } });
 * if (state.state === 'pending') await records.delete({ key: 'k-1', route: 'POST /payments', user: { id: 42 } });
 * ```
 */
@Injectable()
export class IdempotencyRecords {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /** The record's state; nothing is changed. Throws BadRequestException for a malformed query. */
  async inspect(query: IdempotencyRecordQuery): Promise<IdempotencyRecordState> {
    const found = await this.bounded(this.store.inspect(this.storeKey(query)));
    if (found.state !== 'completed') {
      // Places and names only, whatever else a store hands over.
      const steps = found.steps?.map(({ index, name }) => ({ index, name }));
      if (steps?.length) return { ...found, steps };
      if (found.state === 'absent') return { state: 'absent' };
      return { state: 'pending', leaseMsLeft: found.leaseMsLeft };
    }
    const { status, error } = describeMeta(found.meta);
    const { bytes, ageMs, ttlMsLeft } = found;
    return { state: 'completed', status, error, bytes, ageMs, ttlMsLeft };
  }

  /**
   * Deletes the record whatever its state, with the steps a `resumable` handler recorded under
   * it (also when only those remain: after a step mismatch, to run the request from its first
   * step): the next request with the key runs the handler from the start. A handler still
   * running under it is fenced (its response and its next step are not stored), and duplicates
   * waiting on it claim the key. @returns whether there was a record or steps.
   */
  async delete(query: IdempotencyRecordQuery): Promise<boolean> {
    const key = this.storeKey(query);
    // This process replays it no more from memory (option localReplayCache), nor keeps it from
    // a replay that read it while it was being deleted; others may, for the cache's ttl.
    const replays = replayCacheOf(this.options);
    replays?.delete(key);
    const deleted = await this.bounded(this.store.delete(key)).finally(() => replays?.delete(key));
    if (deleted) this.logger.log(`deleted the record ${key} of ${query.route}`);
    return deleted;
  }

  /** A store call bounded by `storeTimeout`: a ServiceUnavailableException (503) after it. */
  private bounded<T>(call: Promise<T>): Promise<T> {
    const { storeTimeout } = this.options;
    return withTimeout(call, storeTimeout, () => {
      const message = `IdempotencyRecords: the store did not answer within ${storeTimeout} ms`;
      return new ServiceUnavailableException(message);
    });
  }

  /**
   * The store key of the record, as the interceptor derives it. A query that names no record
   * (no route, a key that is not one, an owner without an id) is a BadRequestException.
   */
  private storeKey(query: IdempotencyRecordQuery): string {
    const { route, user, tenant, keyPrefix = this.options.keyPrefix } = query;
    try {
      if (typeof route !== 'string' || route === '') {
        throw new TypeError('route must name a route, e.g. "POST /payments"');
      }
      if (typeof keyPrefix !== 'string') throw new TypeError('keyPrefix must be a string');
      // Any length: a route may accept longer keys than the module (its own maxKeyLength). A
      // run() record's key is any text, as run() took it; a route's, as its header parses.
      const key = route.startsWith(RUN_SPACE)
        ? runKeyText(query.key, Number.MAX_SAFE_INTEGER)
        : parseIdempotencyKey(query.key, Number.MAX_SAFE_INTEGER);
      const owner = tenantId(tenant, route);
      const principal = owner === undefined ? principalId(user, route) : undefined;
      return recordKey(keyPrefix, recordScope(route, owner, principal), key);
    } catch (error) {
      throw new BadRequestException(`IdempotencyRecords: ${describe(error)}`, { cause: error });
    }
  }
}
