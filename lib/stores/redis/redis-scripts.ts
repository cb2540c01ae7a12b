import { readFileSync } from 'node:fs';
import { join } from 'node:path';
// Node's own, which a test's fake timers (they patch the global) leave alone: corked commands
// must leave whatever the clock does.
import { setImmediate } from 'node:timers';
import type { Cluster, Redis } from 'ioredis';
import { loadOptional, packageFolder } from '../../utils/load-optional';

/**
 * Where the package keeps its Lua scripts: `lua/` at the package root, next to `lib/` and `dist/`.
 * Looked up on first use, not at import: an app on the memory store (or a bundle that left `lua/`
 * out) must not fail to load because of it.
 */
let luaDir: string | undefined;

/**
 * Script names carry a version: a client shared by two versions of this package, or a script
 * changed in a later release, never runs the wrong body under a cached SHA. 5: completed records
 * carry their completion time (a 5th value, which earlier scripts ignore). 6: the scripts keep
 * the listing index (lua/listing-index.lua), and completed records what their claim carried. 7:
 * bodies over 4 KiB live apart (a 'C' record), and most claims run no script (see claim-2.lua).
 */
const SCRIPT_VERSION = 7;

/** Each script's file, `lua/<name>-<number of keys>.lua`. */
const SCRIPTS = {
  claim: 'claim-2',
  complete: 'complete-4',
  release: 'release-3',
  extend: 'extend-2',
  inspect: 'inspect-1',
  delete: 'delete-4',
  // Resumable runs (steps): each the script above and the key's steps hash, in one round trip.
  claimResumable: 'claim-3',
  completeResumable: 'complete-5',
  step: 'step-2',
  inspectSteps: 'inspect-2',
  // Operators' listing (lib/stores/redis/redis-listing.ts).
  abandon: 'abandon-3',
  list: 'list-0',
} as const;

type ScriptName = keyof typeof SCRIPTS;
type Reply = number | Buffer | null | Reply[];

/** The commands this package defines on an ioredis client. */
export type IdempotencyCommands = Record<
  ScriptName,
  (...args: (string | Buffer | number)[]) => Promise<Reply>
>;

const sources = new Map<string, string>();

/**
 * A line `--- @include <file>` of a script: replaced by that file's text, as bullmq's loader
 * does, so a resumable run's script runs the plain script's logic from the one file that holds
 * it (claim-3.lua includes claim-2.lua), and every script that keeps the listing index the same
 * helpers (listing-index.lua).
 */
const INCLUDE = /^[ \t]*--- @include ([\w-]+)[ \t]*$/gm;

function readScript(file: string): string {
  let lua = sources.get(file);
  if (lua === undefined) {
    luaDir ??= packageFolder('lua');
    lua = readFileSync(join(luaDir, `${file}.lua`), 'utf8').replace(
      INCLUDE,
      (_, included: string) => readScript(included),
    );
    sources.set(file, lua);
  }
  return lua;
}

/** What `defineCommand` registers: ioredis's script, which sends itself through a client. */
interface DefinedScript {
  execute(client: Redis, args: unknown[], options: { replyEncoding: null }): Promise<Reply>;
}

/**
 * Registers the scripts with `defineCommand` (once per client): ioredis runs them with EVALSHA
 * and falls back to EVAL on NOSCRIPT, so they survive SCRIPT FLUSH and server restarts.
 * Returns the commands in their Buffer-reply form, so binary bodies come back intact.
 *
 * On a single-node client (Sentinel too) a command is sent by its script directly, on a socket
 * corked until the end of the event-loop turn ({@link corkForThisTurn}): one write per turn, as
 * with auto-pipelining, without a Pipeline per turn and a second Command per call (an EVALSHA
 * of the claim: 8.5 against 10.0 µs of client CPU in bench/clients.js). A Cluster routes by slot:
 * its own path.
 */
export function defineIdempotencyCommands(client: Redis | Cluster): IdempotencyCommands {
  const target = client as unknown as Record<string, unknown>;
  const scripts = (client as { scriptsSet?: Record<string, DefinedScript | undefined> }).scriptsSet;
  const commands = {} as IdempotencyCommands;
  for (const [name, file] of Object.entries(SCRIPTS) as [ScriptName, string][]) {
    const command = `idempotency_${name}_v${SCRIPT_VERSION}`;
    if (typeof target[command] !== 'function') {
      const numberOfKeys = Number(file.slice(file.lastIndexOf('-') + 1));
      client.defineCommand(command, { numberOfKeys, lua: readScript(file) });
    }
    const script = scripts?.[command];
    if (!client.isCluster && typeof script?.execute === 'function') {
      const redis = client as Redis;
      commands[name] = (...args) => {
        corkForThisTurn(redis);
        return script.execute(redis, args, { replyEncoding: null });
      };
    } else {
      const fn = target[`${command}Buffer`] as IdempotencyCommands[ScriptName];
      commands[name] = fn.bind(client);
    }
  }
  return commands;
}

/** Sends a native command, e.g. `SET`, with Buffer replies, in order with the scripts. */
export type NativeCommand = (name: string, ...args: (string | Buffer | number)[]) => Promise<Reply>;

/**
 * How the store sends native commands on `client`: the way its scripts go (see
 * {@link defineIdempotencyCommands}), so that commands and scripts reach Redis in the order they
 * were sent. Through a Cluster, its own routing. On a single node, a `Command` sent directly on the
 * corked socket; undefined where that cannot be (a client of another copy of ioredis than the one
 * this package loads): the store then sends scripts only.
 */
export function nativeCommand(client: Redis | Cluster): NativeCommand | undefined {
  if (client.isCluster) {
    // `<name>Buffer`, not callBuffer: ioredis's auto-pipelining drops the name of a `call`.
    const target = client as unknown as Record<string, (...args: unknown[]) => Promise<Reply>>;
    return (name, ...args) => target[`${name}Buffer`].call(client, ...args);
  }
  const ioredis = loadOptional<typeof import('ioredis')>('ioredis');
  if (!ioredis || !(client instanceof ioredis.Redis)) return undefined;
  const { Command } = ioredis;
  const redis = client as Redis;
  const options = { replyEncoding: null, keyPrefix: redis.options.keyPrefix };
  return (name, ...args) => {
    corkForThisTurn(redis);
    return redis.sendCommand(new Command(name, args, options)) as Promise<Reply>;
  };
}

/** Sockets corked until the end of this event-loop turn. */
const corked = new WeakSet<object>();

/**
 * Holds a ready client's writes until the end of this event-loop turn (`setImmediate`, after the
 * turn's I/O callbacks): the commands of every request handled in the turn leave in one write.
 * The order of commands, and so of replies, is the order they were sent in.
 */
function corkForThisTurn(client: Redis): void {
  const { stream } = client;
  if (client.status !== 'ready' || !stream || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  setImmediate(() => {
    corked.delete(stream);
    stream.uncork();
  });
}
