import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { packageFolder } from '../../lib/utils/load-optional';
import { RedisProcess, startRedisServer } from '../support/redis-server';
import { step } from '../support/step-cases';

/**
 * What steps cost Redis, watched with MONITOR on a private server: a run that is not resumable
 * sends the scripts it always sent (the -1 files, as they are) and they run the same commands;
 * a resumable run's calls are one script each.
 */

/** Script name by the SHA-1 of its text, for every script file as it is sent. */
const scripts = new Map<string, string>();
const luaDir = packageFolder('lua');
for (const file of readdirSync(luaDir).filter((name) => name.endsWith('-1.lua'))) {
  const sha = createHash('sha1')
    .update(readFileSync(join(luaDir, file)))
    .digest('hex');
  scripts.set(sha, file.replace('.lua', ''));
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };

/** An argument as MONITOR quotes it (ioredis unquotes `\"` only) back to its bytes' text. */
function unquote(arg: string): string {
  return arg.replace(/\\(x[0-9a-f]{2}|.)/g, (_, code: string) =>
    code.length === 3 ? String.fromCharCode(parseInt(code.slice(1), 16)) : (ESCAPES[code] ?? code),
  );
}

describe('what a run costs Redis, with and without steps', () => {
  let server: RedisProcess;
  let monitor: Redis;
  let store: RedisIdempotencyStore;
  let seen: string[] = [];
  let marker = 0;
  let markerSeen: (() => void) | undefined;

  /**
   * The commands Redis ran for `fn`: each script as `script:<file>` (a -1 file, by the SHA of
   * its text), or `script:2 keys` for the -2 scripts, which the loader assembles; then the
   * commands the script ran.
   */
  async function commandsOf(fn: () => Promise<unknown>): Promise<string[]> {
    await drained(); // what earlier calls ran must not count here
    seen = [];
    await fn();
    await drained();
    return seen;
  }

  /**
   * Resolves once MONITOR has reported every command sent so far: it reports them in the order
   * Redis ran them, so once a command sent last shows up, all those before it have.
   */
  async function drained(): Promise<void> {
    const echo = `end-${++marker}`;
    const arrived = new Promise<void>((resolve) => (markerSeen = resolve));
    await store.client.echo(echo);
    await arrived;
  }

  beforeAll(async () => {
    // A private server: MONITOR must see this suite's commands only.
    server = await startRedisServer();
    store = new RedisIdempotencyStore(new Redis(server.url), { ownsClient: true });
    monitor = await new Redis(server.url).monitor();
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const [name, first] = [args[0].toLowerCase(), args[1]];
      if (name === 'echo' && first === `end-${marker}`) {
        markerSeen?.();
        return;
      }
      if (name === 'eval' || name === 'evalsha') {
        const sha =
          name === 'eval'
            ? createHash('sha1')
                .update(Buffer.from(unquote(first), 'latin1'))
                .digest('hex')
            : first;
        seen.push(`script:${scripts.get(sha) ?? `${Number(args[2])} keys`}`);
      } else if (source === 'lua') {
        seen.push(name);
      }
    });
  });
  afterAll(async () => {
    monitor.disconnect();
    await store.close();
    await server.stop();
  });

  it('runs the -1 scripts, and the commands they always ran, for a run without steps', async () => {
    const claim = { token: 'a', fingerprint: 'fp', leaseMs: 60_000 };
    const body = { meta: 'm', body: Buffer.from('ok') };
    expect(await commandsOf(() => store.claim('{k1}', claim))).toEqual([
      'script:claim-1',
      'getrange',
      'set',
    ]);
    expect(await commandsOf(() => store.complete('{k1}', 'a', body, 60_000))).toEqual([
      'script:complete-1',
      'get',
      'time',
      'set',
    ]);
    expect(await commandsOf(() => store.claim('{k1}', { ...claim, token: 'b' }))).toEqual([
      'script:claim-1',
      'getrange',
      'get',
    ]);
    await store.claim('{k2}', claim);
    expect(await commandsOf(() => store.extend('{k2}', 'a', 60_000))).toEqual([
      'script:extend-1',
      'get',
      'pexpire',
    ]);
    expect(await commandsOf(() => store.release('{k2}', 'a'))).toEqual([
      'script:release-1',
      'get',
      'del',
    ]);
  });

  it('sends one script per call of a resumable run', async () => {
    const claim = { token: 'a', fingerprint: 'fp', leaseMs: 60_000, resumable: true };
    const body = { meta: 'm', body: Buffer.from('ok') };
    // No steps yet: one HGET more than claim-1.lua's commands.
    expect(await commandsOf(() => store.claim('{r}', claim))).toEqual([
      'script:2 keys',
      'hget',
      'getrange',
      'set',
    ]);
    expect(await commandsOf(() => store.recordStep('{r}', 'a', step(0, 'order'), 60_000))).toEqual([
      'script:2 keys',
      'get',
      'hset',
      'hset',
      'pexpire',
    ]);
    await store.release('{r}', 'a');
    // Steps to resume from: they come back with the claim.
    expect(await commandsOf(() => store.claim('{r}', { ...claim, token: 'b' }))).toEqual([
      'script:2 keys',
      'hget',
      'getrange',
      'set',
      'hgetall',
    ]);
    const clear = () => store.complete('{r}', 'b', body, 60_000, { clearSteps: true });
    expect(await commandsOf(clear)).toEqual(['script:2 keys', 'get', 'time', 'set', 'del']);
  });
});
