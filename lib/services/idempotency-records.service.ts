import {
  BadRequestException,
  Inject,
  Injectable,
  Logger,
  NotImplementedException,
  ServiceUnavailableException,
} from '@nestjs/common';
import { describe } from '../core/outcome-events';
import { RecordLabels } from '../core/record-label';
import { replayCacheOf } from '../core/replay-cache';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.constants';
import { IdempotencyStore } from '../stores/idempotency.store';
import { recordKey, recordScope, RUN_SPACE, runKeyText } from '../core/record-key';
import { RecordCipher } from '../utils/encryption';
import { parseIdempotencyKey } from '../utils/key';
import type { ResolvedModuleOptions } from '../options';
import { principalId, tenantId } from '../utils/principal';
import { describeMeta } from '../utils/response-codec';
import { withTimeout } from '../utils/timeout';
import {
  type IdempotencyRecordCounts,
  type IdempotencyRecordListPage,
  type IdempotencyRecordListQuery,
  listItem,
  storeListQuery,
  wrapCursor,
} from './record-list';

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

/**
 * A record as {@link IdempotencyRecords.list} found it (an `IdempotencyRecordListItem`, or
 * an `abandoned` event's `record`): `inspect()` and `delete()` go by its `ref`, its store key.
 */
export interface IdempotencyRecordRef {
  ref: string;
  /** The prefix it was listed under (the module's `keyPrefix` when absent). */
  keyPrefix?: string;
  /** Its route, for the log line of a deletion. */
  route?: string;
}

/** What the hash of a record key looks like after its prefix (see `recordKey`). */
const HASH_TAG = /^\{[A-Za-z0-9_-]{22}\}$/;

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
  /** Opens the labels records are listed with (the client's key and owner). */
  private readonly labels: RecordLabels;

  constructor(
    private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {
    const { encryption } = options;
    this.labels = new RecordLabels(encryption ? new RecordCipher(encryption) : undefined);
  }

  /**
   * Lists records in one state, newest (or oldest) first, a page at a time: each item with what
   * `inspect()` and `delete()` need. Reads the store's index, never its whole keyspace. Throws
   * BadRequestException for a malformed query, NotImplementedException when the store cannot
   * list, ServiceUnavailableException after `storeTimeout`.
   *
   * @example
   * ```ts
   * const { items } = await records.list({ state: 'half_done', olderThan: '15m' });
   * ```
   */
  async list(query: IdempotencyRecordListQuery): Promise<IdempotencyRecordListPage> {
    const store = this.listing();
    const { keyPrefix, maxLockHold } = this.options;
    const asked = this.checked(() => storeListQuery(query, keyPrefix, maxLockHold));
    const page = await this.bounded(store.list!(asked));
    const now = Date.now();
    const items = page.items.map((record) => listItem(record, asked.prefix, this.labels, now));
    return page.cursor ? { items, cursor: wrapCursor(asked, page.cursor) } : { items };
  }

  /**
   * How many records each state holds under `keyPrefix` (the module's by default), a claim held
   * past `maxLockHold` counted as stuck. Errors as {@link list}'s.
   */
  async counts(keyPrefix = this.options.keyPrefix): Promise<IdempotencyRecordCounts> {
    const store = this.listing();
    if (typeof keyPrefix !== 'string') {
      throw new BadRequestException('IdempotencyRecords: keyPrefix must be a string');
    }
    return this.bounded(store.countRecords!(keyPrefix, this.options.maxLockHold));
  }

  /**
   * The record's state; nothing is changed. Takes a query (key, route, owner) or a listed item.
   * Throws BadRequestException for a malformed query.
   */
  async inspect(
    query: IdempotencyRecordQuery | IdempotencyRecordRef,
  ): Promise<IdempotencyRecordState> {
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
  async delete(query: IdempotencyRecordQuery | IdempotencyRecordRef): Promise<boolean> {
    const key = this.storeKey(query);
    // This process replays it no more from memory (option localReplayCache), nor keeps it from
    // a replay that read it while it was being deleted; others may, for the cache's ttl.
    const replays = replayCacheOf(this.options);
    replays?.delete(key);
    const deleted = await this.bounded(this.store.delete(key)).finally(() => replays?.delete(key));
    if (deleted) this.logger.log(`deleted the record ${key} of ${query.route ?? 'its route'}`);
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

  /** The store, when it lists records; a NotImplementedException (501) otherwise. */
  private listing(): IdempotencyStore {
    const { store } = this;
    if (store.list && store.countRecords) return store;
    throw new NotImplementedException(
      `IdempotencyRecords: the store (${store.constructor.name}) cannot list records: it has ` +
        'no list() and countRecords() (see docs/stores.md)',
    );
  }

  /** What `check` returns; what it throws is a BadRequestException (400). */
  private checked<T>(check: () => T): T {
    try {
      return check();
    } catch (error) {
      throw new BadRequestException(`IdempotencyRecords: ${describe(error)}`, { cause: error });
    }
  }

  /**
   * The store key of the record: a listed item's `ref`, or derived from a query as the
   * interceptor derives it. A query that names no record (no route, a key that is not one, an
   * owner without an id, a `ref` that is no record key) is a BadRequestException.
   */
  private storeKey(query: IdempotencyRecordQuery | IdempotencyRecordRef): string {
    if (typeof query === 'object' && query !== null && 'ref' in query) {
      return this.checked(() => refKey(query, this.options.keyPrefix));
    }
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

/**
 * The store key a listed item names, checked to be a record key under its prefix: a ref is a
 * key the stores delete whatever it is, so it may name nothing else.
 */
function refKey({ ref, keyPrefix }: IdempotencyRecordRef, defaultPrefix: string): string {
  const prefix = keyPrefix ?? defaultPrefix;
  if (typeof prefix !== 'string') throw new TypeError('keyPrefix must be a string');
  if (
    typeof ref !== 'string' ||
    !ref.startsWith(prefix) ||
    !HASH_TAG.test(ref.slice(prefix.length))
  ) {
    throw new TypeError(`ref must be a record key under ${JSON.stringify(prefix)}`);
  }
  return ref;
}
