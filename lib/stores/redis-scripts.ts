import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import { packageFolder } from '../utils/load-optional';

/**
 * Where the package keeps its Lua scripts: `lua/` at the package root, next to `lib/` and `dist/`.
 * Looked up on first use, not at import: an app on the memory store (or a bundle that left `lua/`
 * out) must not fail to load because of it.
 */
let luaDir: string | undefined;

/**
 * Script names carry a version: a client shared by two versions of this package, or a script
 * changed in a later release, never runs the wrong body under a cached SHA. 5: completed records
 * carry their completion time (a 5th value, which earlier scripts ignore).
 */
const SCRIPT_VERSION = 5;

const SCRIPTS = {
  claim: 'claim-1',
  complete: 'complete-1',
  release: 'release-1',
  extend: 'extend-1',
  inspect: 'inspect-1',
  delete: 'delete-1',
} as const;

type ScriptName = keyof typeof SCRIPTS;
type Reply = number | Buffer | null | Reply[];

/** The commands this package defines on an ioredis client. */
export type IdempotencyCommands = Record<
  ScriptName,
  (...args: (string | Buffer | number)[]) => Promise<Reply>
>;

const sources = new Map<string, string>();

function readScript(file: string): string {
  let lua = sources.get(file);
  if (lua === undefined) {
    luaDir ??= packageFolder('lua');
    lua = readFileSync(join(luaDir, `${file}.lua`), 'utf8');
    sources.set(file, lua);
  }
  return lua;
}

/**
 * Registers the scripts with `defineCommand` (once per client): ioredis runs them with EVALSHA
 * and falls back to EVAL on NOSCRIPT, so they survive SCRIPT FLUSH and server restarts.
 * Returns the commands in their Buffer-reply form, so binary bodies come back intact.
 */
export function defineIdempotencyCommands(client: Redis | Cluster): IdempotencyCommands {
  const target = client as unknown as Record<string, unknown>;
  const commands = {} as IdempotencyCommands;
  for (const [name, file] of Object.entries(SCRIPTS) as [ScriptName, string][]) {
    const command = `idempotency_${name}_v${SCRIPT_VERSION}`;
    if (typeof target[command] !== 'function') {
      const numberOfKeys = Number(file.slice(file.lastIndexOf('-') + 1));
      client.defineCommand(command, { numberOfKeys, lua: readScript(file) });
    }
    const fn = target[`${command}Buffer`] as IdempotencyCommands[ScriptName];
    commands[name] = fn.bind(client);
  }
  return commands;
}
