import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { RedisProcess, startRedisServer } from '../support/redis-server';
import { step } from '../support/step-cases';

/**
 * What a run costs Redis, watched with MONITOR on a private server: a claim without steps is one
 * native SET NX GET (its listing entry an HSET sent behind it, lua/listing-index.lua), every
 * other call one script, with steps or without; a completion keeps the listing index in its
 * script, and a replay reads the record alone.
 */

/** Script name (`claim`, `completeResumable`...) by the SHA-1 ioredis sends it under. */
const scripts = new Map<string, string>();

/**
 * `commands` without what runs now and then, not on every call: the listing's pruning (one
 * claim in 128: lua/listing-prune.lua) and the expired head of a done list (one completion in 8).
 */
function everyTime(commands: string[]): string[] {
  const pruning = commands.indexOf('hscan');
  let kept = commands;
  if (pruning > 0) {
    // HGET of the cursor, HSCAN, HSET of the cursor, then each entry's look; a resumable claim
    // goes on with its HGETALL.
    const resumes = commands.indexOf('hgetall', pruning);
    kept = [...commands.slice(0, pruning - 1), ...(resumes < 0 ? [] : commands.slice(resumes))];
  }
  return kept.filter((name) => name !== 'lrange' && name !== 'ltrim');
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
    const defined = (store.client as unknown as { scriptsSet: Record<string, { sha: string }> })
      .scriptsSet;
    for (const [command, script] of Object.entries(defined)) {
      scripts.set(script.sha, command.replace(/^idempotency_/, '').replace(/_v\d+$/, ''));
    }
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
        seen.push(`script:${scripts.get(sha) ?? `unknown ${sha}`}`);
      } else {
        // Commands the app sent itself, as `app:<name>`; those scripts ran, by name.
        seen.push(source === 'lua' ? name : `app:${name}`);
      }
    });
  });
  afterAll(async () => {
    monitor.disconnect();
    await store.close();
    await server.stop();
  });

  it('lists a run without steps in the script of each call; a replay reads the record alone', async () => {
    const claim = { token: 'a', fingerprint: 'fp', leaseMs: 60_000 };
    const body = { meta: 'm', body: Buffer.from('ok') };
    const commands = async (fn: () => Promise<unknown>) => everyTime(await commandsOf(fn));
    expect(await commands(() => store.claim('{k1}', claim))).toEqual(['app:set', 'app:hset']);
    // The first completion into a done list names its ttl too (SADD); later ones do not.
    expect(await commands(() => store.complete('{k1}', 'a', body, 60_000))).toEqual([
      'script:complete',
      'get',
      'time',
      'set',
      'hdel',
      'rpush',
      'pexpire',
      'sadd',
    ]);
    expect(await commands(() => store.claim('{k1}', { ...claim, token: 'b' }))).toEqual([
      'app:set',
    ]);
    await store.claim('{k2}', claim);
    // The record's copy of its listing entry keeps the lease's end too (for a 409's Retry-After).
    expect(await commands(() => store.extend('{k2}', 'a', 60_000))).toEqual([
      'script:extend',
      'get',
      'time',
      'set',
      'hget',
      'time',
      'hset',
    ]);
    expect(await commands(() => store.release('{k2}', 'a'))).toEqual([
      'script:release',
      'get',
      'del',
      'hget',
      'exists',
      'hdel',
    ]);
    await store.claim('{k3}', claim);
    expect(await commands(() => store.complete('{k3}', 'a', body, 60_000))).toEqual([
      'script:complete',
      'get',
      'time',
      'set',
      'hdel',
      'rpush',
      'pexpire',
    ]);
    // A 409 and a 422: the SET NX GET alone, whose reply is a pending or completed record (a
    // completed body over 4 KiB lives apart: redis-record-cost.e2e-spec.ts).
    await store.claim('{k4}', claim);
    expect(await commands(() => store.claim('{k4}', { ...claim, token: 'b' }))).toEqual([
      'app:set',
    ]);
    expect(await commands(() => store.claim('{k4}', { ...claim, fingerprint: 'x' }))).toEqual([
      'app:set',
    ]);
  });

  it('sends one script per call of a resumable run', async () => {
    const claim = { token: 'a', fingerprint: 'fp', leaseMs: 60_000, resumable: true };
    const body = { meta: 'm', body: Buffer.from('ok') };
    const commands = async (fn: () => Promise<unknown>) => everyTime(await commandsOf(fn));
    // No steps yet: one HGET more than a plain claim's commands.
    expect(await commands(() => store.claim('{r}', claim))).toEqual([
      'script:claimResumable',
      'hget',
      'getrange',
      'time',
      'set',
      'hset',
    ]);
    expect(await commands(() => store.recordStep('{r}', 'a', step(0, 'order'), 60_000))).toEqual([
      'script:step',
      'get',
      'hset',
      'hset',
      'pexpire',
    ]);
    // Released with steps: half done from now on.
    expect(await commands(() => store.release('{r}', 'a'))).toEqual([
      'script:release',
      'get',
      'del',
      'hget',
      'exists',
      'time',
      'hset',
    ]);
    // Steps to resume from: they come back with the claim.
    expect(await commands(() => store.claim('{r}', { ...claim, token: 'b' }))).toEqual([
      'script:claimResumable',
      'hget',
      'getrange',
      'time',
      'set',
      'hset',
      'hgetall',
    ]);
    const clear = () => store.complete('{r}', 'b', body, 60_000, { clearSteps: true });
    expect(await commands(clear)).toEqual([
      'script:completeResumable',
      'get',
      'time',
      'set',
      'hdel',
      'rpush',
      'pexpire',
      'del',
    ]);
  });
});
