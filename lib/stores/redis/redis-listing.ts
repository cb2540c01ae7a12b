import type { Cluster, Redis } from 'ioredis';
import type {
  ListedRecord,
  ListedState,
  ListRecordsPage,
  ListRecordsQuery,
  RecordCounts,
} from '../record-listing';
import { keyPrefixOf, pageOf, readCursor } from '../record-pages';
import { defineIdempotencyCommands, type IdempotencyCommands } from './redis-scripts';
import { keySlot, SLOTS, slotTags } from './redis-slots';
import { decodeStepNames } from './redis-steps';

/**
 * How long a claim whose process died without steps stays listed as stuck, from its claim, in
 * ms (the scripts' `pruneRuns`, lua/listing-index.lua): unless its key is claimed again or
 * deleted first.
 */
export const STUCK_RETENTION_MS = 24 * 60 * 60 * 1000;

/** How often a process adds a ttl to its space's set of ttls again (ms): see `register`. */
const REGISTER_EVERY_MS = 60_000;

/** How many spaces (slots) one call of lua/list-0.lua reads, on a Cluster. */
const SPACES_PER_CALL = 1024;

/** One item as lua/list-0.lua replies it. */
type ListedReply = [
  number,
  Buffer,
  number | null,
  Buffer | null,
  Buffer | null,
  (Buffer | number)[],
  Buffer | null,
  number,
];

/**
 * The Redis store's listing: the index keys its scripts keep (see lua/listing-index.lua), and
 * the reads of lua/list-0.lua. On a single node (Sentinel too) a key prefix has one index space;
 * on a Cluster, one per slot, so that each script touches keys of the record's slot only, and a
 * listing runs lua/list-0.lua on every master over the spaces of the slots it serves.
 */
export class RedisListing {
  /** The client's own keyPrefix, which ioredis adds to KEYS but not to ARGV. */
  private readonly clientPrefix: string;
  /**
   * On a Cluster, per key prefix: the slots that have a space (those whose space's name maps to
   * them), as `{<tag>}`, the part of the space's name lua/list-0.lua is given.
   */
  private readonly slotSpaces = new Map<string, (string | undefined)[]>();
  /** The commands defined on each Cluster node the listing ran on. */
  private readonly nodeCommands = new WeakMap<Redis, IdempotencyCommands>();
  /** When this process last added each done set's ttl to its space's set of ttls. */
  private readonly registered = new Map<string, number>();

  constructor(
    private readonly client: Redis | Cluster,
    private readonly commands: IdempotencyCommands,
    /** False: no key has a space, so no script keeps the index (the store option `listing`). */
    private readonly enabled = true,
  ) {
    this.clientPrefix = client.options.keyPrefix ?? '';
  }

  /**
   * The KEYS of the claim scripts: the record's and its space's runs (lua/claim-2.lua), and for
   * a resumable claim its steps' (lua/claim-3.lua); and their last argument, the record's id.
   */
  claimKeys(key: string, steps?: string): { keys: string[]; id: string } {
    const space = this.spaceOf(key);
    const keys = [key, space ? `${space}runs` : key];
    if (steps !== undefined) keys.push(steps);
    return { keys, id: space ? key.slice(key.lastIndexOf('{')) : '' };
  }

  /**
   * The KEYS of the completion scripts (lua/complete-4.lua, with the steps' lua/complete-5.lua),
   * and their last arguments: whether to add `ttlMs` to the space's set of ttls, the record's id.
   */
  completeKeys(key: string, ttlMs: number, steps?: string) {
    const space = this.spaceOf(key);
    if (!space) {
      const keys = [key, key, key, key];
      if (steps !== undefined) keys.push(steps);
      return { keys, register: '0', id: '' };
    }
    const done = `${space}done:${ttlMs}`;
    const keys = [key, `${space}runs`, `${space}ttls`, done];
    if (steps !== undefined) keys.push(steps);
    return { keys, register: this.register(done), id: key.slice(key.lastIndexOf('{')) };
  }

  /** The KEYS of lua/delete-4.lua, `steps` the key's steps (or the key where it has none). */
  deleteKeys(key: string, steps: string): string[] {
    const space = this.spaceOf(key);
    return space ? [key, `${space}runs`, `${space}ttls`, steps] : [key, key, key, steps];
  }

  /**
   * The runs of `key`'s listing space (lua/listing-index.lua), or the key itself where the index
   * cannot hold it: what lua/release-3.lua, lua/extend-2.lua and lua/abandon-3.lua take.
   */
  runsOf(key: string): string {
    const space = this.spaceOf(key);
    return space ? `${space}runs` : key;
  }

  /**
   * The listing space of `key` (see lua/listing-index.lua), or undefined when the index cannot
   * hold the key: a key without a trailing `{hash tag}`, or on a Cluster one whose prefix's
   * braces would put the space on another slot. The scripts are then given the record key in
   * place of its index keys.
   */
  private spaceOf(key: string): string | undefined {
    if (!this.enabled) return undefined;
    const prefix = keyPrefixOf(key);
    if (prefix === undefined || !this.client.isCluster) {
      return prefix === undefined ? undefined : `${prefix}ix:`;
    }
    const slot = keySlot(this.clientPrefix + key);
    const space = `${prefix}ix{${slotTags()[slot]}}:`;
    return keySlot(this.clientPrefix + space) === slot ? space : undefined;
  }

  /**
   * '1' when a completion into `done` should add its ttl to the space's set of ttls (what
   * listing finds the done sets by): the first time in this process, then every minute, so that
   * a set of ttls lost (flushed, deleted) is whole again within one. '0' otherwise: a completion
   * then costs Redis one command less.
   */
  private register(done: string): string {
    const now = Date.now();
    if ((this.registered.get(done) ?? -Infinity) > now - REGISTER_EVERY_MS) return '0';
    this.registered.set(done, now);
    return '1';
  }

  /** A page of `IdempotencyStore.list()`: lua/list-0.lua's replies (one per call), merged. */
  async list(query: ListRecordsQuery): Promise<ListRecordsPage> {
    const from = query.cursor === undefined ? undefined : readCursor(query.cursor);
    const args = [
      'list',
      this.clientPrefix + query.prefix,
      query.state,
      query.stuckAfterMs ?? '',
      query.route === undefined ? '' : `=${query.route}`,
      query.minAgeMs ?? '',
      query.maxAgeMs ?? '',
      query.order ?? 'newest',
      query.limit,
      from?.since ?? '',
      from ? from.key.slice(query.prefix.length) : '',
    ];
    const replies = await this.onEachNode(query.prefix, args);
    const items = replies.flatMap((reply) =>
      (reply as ListedReply[]).map((item) => listed(query.prefix, query.state, item)),
    );
    return pageOf(items, query);
  }

  /** `IdempotencyStore.countRecords()`: lua/list-0.lua's counts, summed over its calls. */
  async count(prefix: string, stuckAfterMs?: number): Promise<RecordCounts> {
    const args = ['count', this.clientPrefix + prefix, '', stuckAfterMs ?? ''];
    const replies = await this.onEachNode(prefix, [...args, '', '', '', '', 0, '', '']);
    const counts: RecordCounts = { running: 0, stuck: 0, half_done: 0, completed: 0 };
    for (const [running, stuck, halfDone, completed] of replies as number[][]) {
      counts.running += running;
      counts.stuck += stuck;
      counts.half_done += halfDone;
      counts.completed += completed;
    }
    return counts;
  }

  /** lua/list-0.lua with `args` and the spaces of `prefix`: on the node, or on each master. */
  private async onEachNode(prefix: string, args: (string | number)[]): Promise<unknown[]> {
    const head = `${this.clientPrefix}${prefix}ix`;
    if (!this.client.isCluster) return [await this.commands.list(...args, head, '')];
    // A script per 1 024 slots: it blocks its master a few ms (a probe per slot), not the time
    // of every slot the master serves. Calls to one master queue behind each other there.
    const calls: Promise<unknown>[] = [];
    for (const [node, spaces] of await this.spacesByNode(prefix)) {
      for (let i = 0; i < spaces.length; i += SPACES_PER_CALL) {
        const some = spaces.slice(i, i + SPACES_PER_CALL);
        calls.push(this.commandsOf(node).list(...args, head, ...some));
      }
    }
    return Promise.all(calls);
  }

  /** The spaces of `prefix` (their `{<tag>}`) by the master serving their slot. */
  private async spacesByNode(prefix: string): Promise<Map<Redis, string[]>> {
    const cluster = this.client as Cluster;
    if (!cluster.slots[SLOTS - 1]?.length) await cluster.ping();
    const masters = new Map<string, Redis>();
    for (const node of cluster.nodes('master')) {
      masters.set(`${node.options.host}:${node.options.port}`, node);
    }
    const byNode = new Map<Redis, string[]>();
    for (const [slot, space] of this.spacesOf(prefix).entries()) {
      if (space === undefined) continue;
      const node = masters.get(cluster.slots[slot]?.[0] ?? '');
      if (!node) throw new Error(`RedisIdempotencyStore: no master serves slot ${slot} now`);
      let spaces = byNode.get(node);
      if (!spaces) byNode.set(node, (spaces = []));
      spaces.push(space);
    }
    return byNode;
  }

  /** Each slot's space of `prefix` (its `{<tag>}`), if the slot has one. */
  private spacesOf(prefix: string): (string | undefined)[] {
    let spaces = this.slotSpaces.get(prefix);
    if (!spaces) {
      const head = `${this.clientPrefix}${prefix}ix`;
      spaces = slotTags().map((tag, slot) =>
        keySlot(`${head}{${tag}}:`) === slot ? `{${tag}}` : undefined,
      );
      this.slotSpaces.set(prefix, spaces);
    }
    return spaces;
  }

  private commandsOf(node: Redis): IdempotencyCommands {
    let commands = this.nodeCommands.get(node);
    if (!commands) this.nodeCommands.set(node, (commands = defineIdempotencyCommands(node)));
    return commands;
  }
}

/** A record as lua/list-0.lua replied it. */
function listed(prefix: string, state: ListedState, reply: ListedReply): ListedRecord {
  const [since, id, leaseMsLeft, route, label, names, meta, reported] = reply;
  const item: ListedRecord = { key: prefix + id.toString(), state, since: Number(since) };
  if (route?.length || label?.length) {
    item.about = { route: route?.toString() ?? '', label: label?.toString() ?? '' };
  }
  if (leaseMsLeft !== null) item.leaseMsLeft = Number(leaseMsLeft);
  const steps = decodeStepNames(names);
  if (steps.length > 0) item.steps = steps;
  if (meta !== null) item.meta = meta.toString();
  if (state === 'half_done') item.reported = Number(reported) === 1;
  return item;
}
