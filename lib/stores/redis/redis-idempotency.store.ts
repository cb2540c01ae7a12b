import type { Cluster, Redis } from 'ioredis';
import { isUtf8 } from 'node:buffer';
import {
  ClaimRequest,
  ClaimResult,
  CompleteOptions,
  IdempotencyStore,
  RecordInspection,
  StoredResponse,
  StoredStep,
  WatchListener,
} from '../idempotency.store';
import type { ListRecordsPage, ListRecordsQuery, RecordCounts } from '../record-listing';
import { clientReady, disconnect } from './redis-connection';
import { evictingPolicy, evictionWarning } from './redis-eviction';
import { NativeClaims } from './redis-native-claim';
import {
  defineIdempotencyCommands,
  type IdempotencyCommands,
  nativeCommand,
} from './redis-scripts';
import { RedisListing } from './redis-listing';
import { checkRedisStoreOptions, type RedisIdempotencyStoreOptions } from './redis-options';
import { decodeStepNames, decodeSteps, noHashTag, stepsKey } from './redis-steps';
import { RedisSubscriptions } from './redis-subscriptions';

export type { RedisIdempotencyStoreOptions } from './redis-options';

/** Codes returned by `lua/claim-2.lua`. */
const enum ClaimCode {
  Claimed = 1,
  InProgress = 2,
  KeyReused = 3,
  Completed = 4,
}

/**
 * One claim in this many that would run no script runs lua/claim-2.lua instead, which then also
 * prunes the listing index (lua/listing-prune.lua), so that its entries never pile up.
 */
const PRUNE_EVERY = 128;

/** Codes returned by `lua/inspect-1.lua`. */
const enum InspectCode {
  Absent = 0,
  Pending = 1,
  Completed = 2,
}

/**
 * The Redis store: one string per key, every operation one round trip, atomic, on keys of one
 * slot only, so it is Cluster-safe. Works with a single node, Sentinel and Cluster clients.
 *
 * A claim is one native command, `SET key <pending record> NX PX <lease> GET` (see
 * {@link RedisIdempotencyStore.claim}); completion, release, extension and the rest are Lua
 * scripts, each a compare-and-set on the owner token. A completed body over 4 KiB lives apart
 * from its record, at `<key>:b`, so that a claim's reply, and so a 409 or a 422, stays small.
 *
 * Steps of resumable runs (`recordStep`) live in a hash beside the record, `<key>:steps`, in the
 * record's hash slot; the scripts of resumable runs take both keys (claim-3.lua, complete-5.lua).
 *
 * The scripts that claim, complete, release, extend and delete keep a listing index beside the
 * records (lua/listing-index.lua; on a Cluster one per slot), which `list`, `countRecords` and
 * `markAbandoned` read: never the keyspace.
 *
 * Waiting duplicates (`onConflict: 'wait'`) are notified through pub/sub on a channel named like
 * the key: PUBLISH/SUBSCRIBE on a single node, sharded SPUBLISH/SSUBSCRIBE on a Cluster (the
 * channel lives on the key's shard). One subscriber connection per store, opened on first use.
 */
export class RedisIdempotencyStore extends IdempotencyStore {
  /** `'Redis'`, in log lines. */
  override readonly displayName = 'Redis';
  private readonly commands: IdempotencyCommands;
  private readonly subscriptions: RedisSubscriptions;
  /** 'PUBLISH', or on a Cluster 'SPUBLISH' (the channel stays on the key's shard). */
  private readonly publish: 'PUBLISH' | 'SPUBLISH';
  private readonly listing: RedisListing;
  /** Claims so far: one in {@link PRUNE_EVERY} runs a script that prunes the listing index. */
  private claimCount = 0;
  /**
   * Claims without a script (`redis-native-claim.ts`); undefined where native commands cannot be
   * sent in order with the scripts (a client of another copy of ioredis): scripts only.
   */
  private readonly natives?: NativeClaims;

  constructor(
    /** The ioredis client (`Redis` or `Cluster`). */
    readonly client: Redis | Cluster,
    private readonly options: RedisIdempotencyStoreOptions = {},
  ) {
    super();
    const problem = checkRedisStoreOptions(options);
    if (problem) throw new TypeError(`RedisIdempotencyStore: ${problem}`);
    this.commands = defineIdempotencyCommands(client);
    this.subscriptions = new RedisSubscriptions(client);
    this.publish = client.isCluster ? 'SPUBLISH' : 'PUBLISH';
    // Its own property only, as every option is read: never one a polluted prototype holds.
    const listing = !(Object.hasOwn(options, 'listing') && options.listing === false);
    this.listing = new RedisListing(client, this.commands, listing);
    const native = nativeCommand(client);
    if (native) this.natives = new NativeClaims(native, this.listing);
    if (!listing) {
      // A store that does not list, as the module tells one: without these optional methods.
      for (const name of ['list', 'countRecords', 'markAbandoned'] as const) {
        Object.defineProperty(this, name, { value: undefined });
      }
    }
  }

  /**
   * Most claims run no script: `SET key <pending record> NX PX <lease> GET`, whose reply is nil
   * when it took the key, or else the record in the way, from which the answer is decided here
   * (`NativeClaims`, redis-native-claim.ts). A script claims for a duplicate that
   * waits (it marks the record, `lua/claim-2.lua`), for a `resumable` run (the steps recorded
   * under the key come back in the same round trip, `lua/claim-3.lua`), and for a key whose body
   * could not live apart (a Cluster key without a hash tag). A claim that takes the key is listed
   * with its `about`.
   */
  async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const prune = ++this.claimCount % PRUNE_EVERY === 0;
    const { natives } = this;
    const plain = !prune && !request.resumable && !request.waiting;
    if (natives?.usable && plain && this.bodyApart(key)) {
      const answer = await natives.claim(key, request);
      if (answer !== undefined) return answer;
    }
    return this.claimByScript(key, request, prune);
  }

  private async claimByScript(
    key: string,
    request: ClaimRequest,
    prune: boolean,
  ): Promise<ClaimResult> {
    const { about } = request;
    const steps = request.resumable ? this.stepsKeyOf(key) : undefined;
    const { keys, id } = this.listing.claimKeys(key, steps);
    const args = [
      request.token,
      request.fingerprint,
      request.leaseMs,
      request.waiting ? '1' : '0',
      about?.route ?? '',
      about?.label ?? '',
      id,
      prune ? '1' : '0',
    ];
    const reply = (
      steps
        ? await this.commands.claimResumable(...keys, ...args)
        : await this.commands.claim(...keys, ...args)
    ) as [number, (number | Buffer[])?, Buffer?, Buffer?];
    switch (reply[0]) {
      case ClaimCode.Claimed: {
        const steps = request.resumable ? decodeSteps(reply[1] as Buffer[] | undefined) : undefined;
        return steps ? { status: 'claimed', steps } : { status: 'claimed' };
      }
      case ClaimCode.InProgress:
        return { status: 'in_progress', retryAfterMs: Math.max(Number(reply[1]), 0) };
      case ClaimCode.KeyReused:
        return { status: 'key_reused' };
      case ClaimCode.Completed:
        return {
          status: 'completed',
          response: { meta: String(reply[2] ?? ''), body: reply[3] ?? Buffer.alloc(0) },
        };
      default:
        throw new Error(`Unexpected reply from the idempotency claim script: ${String(reply[0])}`);
    }
  }

  /** With `clearSteps`, the key's steps are deleted by the same script (`lua/complete-5.lua`). */
  async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const steps = options?.clearSteps ? this.stepsKeyOf(key) : undefined;
    const { keys, register, id } = this.listing.completeKeys(key, ttlMs, steps);
    const body = sendable(response.body);
    const apart = this.bodyApart(key) ? '1' : '0';
    const args = [token, response.meta, body, ttlMs, this.publish, register, id, apart];
    const reply = steps
      ? await this.commands.completeResumable(...keys, ...args)
      : await this.commands.complete(...keys, ...args);
    return reply === 1;
  }

  /**
   * One script (`lua/step-2.lua`): the step goes into the key's steps hash only while `token`
   * owns the pending record, and the hash is kept `ttlMs` after its latest step.
   */
  override async recordStep(
    key: string,
    token: string,
    step: StoredStep,
    ttlMs: number,
  ): Promise<boolean> {
    const { meta, body } = step.result;
    const steps = this.stepsKeyOf(key);
    const reply = await this.commands.step(
      key,
      steps,
      token,
      step.index,
      step.name,
      meta,
      sendable(body),
      ttlMs,
    );
    return reply === 1;
  }

  /** A released run that left steps is listed as half done from then on. */
  async release(key: string, token: string): Promise<boolean> {
    const steps = stepsKey(this.client, key) ?? key;
    const reply = await this.commands.release(
      key,
      this.listing.runsOf(key),
      steps,
      token,
      this.publish,
    );
    return reply === 1;
  }

  /** The lease's new end is listed too: a claim whose process dies is stuck from then. */
  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.commands.extend(key, this.listing.runsOf(key), token, leaseMs)) === 1;
  }

  /** For a pending or absent record, also the names of the steps recorded under its key. */
  override async inspect(key: string): Promise<RecordInspection> {
    const steps = stepsKey(this.client, key);
    const reply = (
      steps ? await this.commands.inspectSteps(key, steps) : await this.commands.inspect(key)
    ) as [number, ...unknown[]];
    const [code, second, bytes, ageMs, ttlMsLeft] = reply as [
      number,
      (number | Buffer)?,
      number?,
      number?,
      number?,
    ];
    switch (code) {
      case InspectCode.Absent:
        return withSteps({ state: 'absent' }, reply[1]);
      case InspectCode.Pending:
        return withSteps({ state: 'pending', leaseMsLeft: Number(second) }, reply[2]);
      case InspectCode.Completed:
        return {
          state: 'completed',
          meta: String(second),
          bytes: Number(bytes),
          ageMs: Number(ageMs),
          ttlMsLeft: Number(ttlMsLeft),
        };
      default:
        throw new Error(`Unexpected reply from the idempotency inspect script: ${String(code)}`);
    }
  }

  /**
   * The key's steps and its listing go too, in the same script.
   * @returns whether it deleted a live record, or the steps of one that is gone.
   */
  override async delete(key: string): Promise<boolean> {
    const keys = this.listing.deleteKeys(key, stepsKey(this.client, key) ?? key);
    return (await this.commands.delete(...keys, this.publish)) === 1;
  }

  /** From the listing index (lua/list-0.lua): never the keyspace. */
  override list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    return this.listing.list(query);
  }

  override countRecords(prefix: string, stuckAfterMs?: number): Promise<RecordCounts> {
    return this.listing.count(prefix, stuckAfterMs);
  }

  /** One script (lua/abandon-3.lua): exactly one caller of any number marks it. */
  override async markAbandoned(key: string, endedBefore: number): Promise<boolean> {
    const keys = [key, this.listing.runsOf(key), stepsKey(this.client, key) ?? key];
    return (await this.commands.abandon(...keys, Math.floor(endedBefore))) === 1;
  }

  /**
   * Calls `listener` when the record at `key` is completed (with the stored response), released
   * or deleted, through pub/sub on a channel named like the key.
   */
  override watch(key: string, listener: WatchListener): Promise<() => void> {
    return this.subscriptions.watch(key, listener);
  }

  /** Quits the subscriber, and the client if the store owns it. */
  override async close(): Promise<void> {
    await Promise.all([
      this.subscriptions.close(),
      this.options.ownsClient && disconnect(this.client),
    ]);
  }

  /**
   * Resolves true once the client is ready, or at once when it waits for its first command (a
   * client of yours with `lazyConnect`: nothing to wait for); false after `timeoutMs`.
   */
  override whenReady(timeoutMs: number): Promise<boolean> {
    return clientReady(this.client, timeoutMs);
  }

  /**
   * The eviction warning when Redis may evict records (any `maxmemory-policy` but `noeviction`),
   * since an evicted claim or record lets a duplicate run the handler again. Only on a connected
   * client (never connecting one of yours that is lazy); nothing where `CONFIG` is disabled.
   */
  override async bootWarnings(): Promise<string[]> {
    if (this.client.status !== 'ready') return [];
    const policy = await evictingPolicy(this.client);
    return policy === undefined ? [] : [evictionWarning(policy)];
  }

  /** `evictionPolicy` and `warning` when Redis may evict records (see bootWarnings). */
  override async healthDetails(): Promise<Record<string, unknown> | undefined> {
    const policy = await evictingPolicy(this.client);
    return policy === undefined
      ? undefined
      : { evictionPolicy: policy, warning: evictionWarning(policy) };
  }

  /**
   * Whether a body of `key` can live apart, at `<key>:b`: in the key's slot (as its steps can).
   */
  private bodyApart(key: string): boolean {
    return stepsKey(this.client, key) !== undefined;
  }

  /** The steps key of `key`, for the calls of resumable runs; throws where it cannot be. */
  private stepsKeyOf(key: string): string {
    const steps = stepsKey(this.client, key);
    if (steps === undefined) throw noHashTag(key);
    return steps;
  }
}

/**
 * The same bytes as a string when they are UTF-8 (JSON and text are): ioredis writes a command
 * of strings as one string, while a Buffer argument makes it copy the whole batch into a Buffer.
 */
function sendable(body: Buffer): string | Buffer {
  return isUtf8(body) ? body.toString('utf8') : body;
}

/** `inspection` with the steps `lua/inspect-2.lua` replied, when there are any. */
function withSteps<T extends RecordInspection>(inspection: T, names: unknown): T {
  const steps = decodeStepNames(names as (Buffer | number)[] | undefined);
  return steps.length > 0 ? { ...inspection, steps } : inspection;
}
