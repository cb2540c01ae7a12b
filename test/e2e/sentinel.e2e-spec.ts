import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { IdempotencyStore, RedisIdempotencyStore } from '../../lib';
import { findFreePort, RedisProcess, startRedisServer } from '../support/redis-server';
import { post, startTestApp, TestApp } from '../support/test-app';

/** Every sentinel started, so afterAll stops them even when beforeAll failed halfway. */
const sentinelProcesses: ChildProcess[] = [];

/** A redis-server in sentinel mode (it needs a config file of its own, which it rewrites). */
async function startSentinel(masterPort: number): Promise<{ port: number; dir: string }> {
  const port = await findFreePort();
  const dir = mkdtempSync(join(tmpdir(), 'sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${masterPort} 2`,
      'sentinel down-after-milliseconds mymaster 1000',
      'sentinel failover-timeout mymaster 5000',
      '',
    ].join('\n'),
  );
  const child = spawn('redis-server', [conf, '--sentinel'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  sentinelProcesses.push(child);
  // Ready once it logs that it monitors the master (it listens before that).
  await new Promise<void>((resolve, reject) => {
    let log = '';
    child.stdout!.on('data', (chunk) => {
      log += chunk;
      if (log.includes('+monitor master mymaster')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`sentinel exited with ${code}: ${log}`)));
  });
  child.stdout!.resume();
  return { port, dir };
}

async function stopSentinels(): Promise<void> {
  await Promise.all(
    sentinelProcesses.splice(0).map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }),
  );
}

/** Resolves once the replica's replication offset has reached the master's. */
async function replicaCaughtUp(masterPort: number, replicaPort: number): Promise<void> {
  const [m, r] = [new Redis(masterPort), new Redis(replicaPort)];
  const offset = async (client: Redis, field: string) =>
    Number(new RegExp(`${field}:(\\d+)`).exec(await client.info('replication'))?.[1] ?? -1);
  try {
    const target = await offset(m, 'master_repl_offset');
    const deadline = Date.now() + 20_000;
    while ((await offset(r, 'slave_repl_offset')) < target) {
      if (Date.now() > deadline) throw new Error('the replica did not catch up with the master');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    m.disconnect();
    r.disconnect();
  }
}

describe('Redis Sentinel', () => {
  let master: RedisProcess;
  let replica: RedisProcess;
  let sentinels: { port: number; dir: string }[] = [];
  let t: TestApp;

  beforeAll(async () => {
    master = await startRedisServer({ args: ['--repl-diskless-sync-delay', '0'] });
    replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
    sentinels = await Promise.all([1, 2, 3].map(() => startSentinel(master.port)));
    t = await startTestApp('express', {
      redis: {
        sentinels: sentinels.map(({ port }) => ({ host: '127.0.0.1', port })),
        name: 'mymaster',
      },
      storeTimeout: 1_000,
    });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await stopSentinels();
    for (const { dir } of sentinels) rmSync(dir, { recursive: true, force: true });
    await replica?.stop();
    await master?.stop();
  });

  it('connects through Sentinel, and serves again from the promoted replica after a failover', async () => {
    const key = `sentinel-${Date.now()}`;
    const first = await post(t.url, '/payments', { key, body: { amount: 1 } });
    expect(first.status).toBe(201);
    // Kill the master only once the replica holds everything it wrote (replication is async).
    await replicaCaughtUp(master.port, replica.port);
    const client = (t.app.get(IdempotencyStore) as RedisIdempotencyStore).client;
    const reconnected = new Promise<void>((resolve) => client.once('ready', () => resolve()));
    process.kill(master.pid, 'SIGKILL');
    await reconnected; // ioredis asks the sentinels for the new master
    let status = 0;
    const deadline = Date.now() + 30_000;
    // The sentinels need down-after-milliseconds plus an election before a master exists again.
    while (status !== 201 && Date.now() < deadline) {
      status = (await post(t.url, '/payments', { key, body: { amount: 1 } })).status;
      if (status !== 201) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const replay = await post(t.url, '/payments', { key, body: { amount: 1 } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(t.executions.count('create')).toBe(1);
  }, 60_000);
});
