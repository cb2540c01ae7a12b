import { execFile, execFileSync, spawn } from 'node:child_process';
import {
  accessSync,
  existsSync,
  constants as fsConstants,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import Redis from 'ioredis';

/**
 * Launchers for the Redis processes the test-suite runs against. Everything here binds to
 * 127.0.0.1 on ports the OS hands out, so a developer's own Redis on 6379 is never touched (it is
 * only ever PINGed by resolveTestRedis) and parallel suites do not collide.
 */

export interface RedisProcess {
  host: string;
  port: number;
  url: string;
  pid: number;
  /** The process's private working directory (removed by stop()). */
  dir: string;
  /** Idempotent: SIGTERM, then SIGKILL after a bounded wait; resolves once the process is gone. */
  stop(): Promise<void>;
}

export interface RedisClusterProcesses {
  nodes: { host: string; port: number }[];
  processes: RedisProcess[];
  stop(): Promise<void>;
}

export interface TestRedis {
  url: string;
  stop?: () => Promise<void>;
}

/** How globalSetup hands the throwaway server's stop function to globalTeardown. */
export type TestRedisGlobals = typeof globalThis & {
  __IDEMPOTENCY_REDIS_STOP__?: () => Promise<void>;
};

const HOST = '127.0.0.1';
const READY_LINE = 'Ready to accept connections';
const READY_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 5_000;
const KILL_WAIT_MS = 5_000;
const CLUSTER_CREATE_TIMEOUT_MS = 30_000;
const CLUSTER_READY_TIMEOUT_MS = 20_000;
const LOCAL_PING_TIMEOUT_MS = 500;
/** Only the tail of a process's output is kept: enough for an error message, bounded in memory. */
const OUTPUT_LIMIT = 16 * 1024;
const PORT_ATTEMPTS = 5;
/** Redis Cluster's bus listens on port + 10000 unless told otherwise. */
const CLUSTER_BUS_OFFSET = 10_000;
const TOTAL_SLOTS = 16_384;

const MISSING_REDIS_MESSAGE =
  'nestjs-idempotency tests need Redis: nothing answered at 127.0.0.1:6379 (or REDIS_URL) and no ' +
  'redis-server is on PATH. Install it (apt-get install redis-server) or set REDIS_URL.';

// ---------------------------------------------------------------------------------------------
// Binaries
// ---------------------------------------------------------------------------------------------

/** The absolute path of `name` on PATH, or undefined. (POSIX only: PATHEXT is not consulted.) */
export function findExecutable(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here (or not executable); keep looking.
    }
  }
  return undefined;
}

export function hasRedisServer(): boolean {
  return findExecutable('redis-server') !== undefined;
}

export function hasRedisCli(): boolean {
  return findExecutable('redis-cli') !== undefined;
}

/** Throws an error naming the missing binary, so a suite that needs it fails instead of skipping. */
function requireExecutable(name: 'redis-server' | 'redis-cli', purpose: string): void {
  if (findExecutable(name) === undefined) {
    throw new Error(
      `nestjs-idempotency tests need \`${name}\` on PATH to ${purpose}, but it was not found ` +
        `(PATH=${process.env.PATH ?? ''}). Install it (apt-get install redis-server, which ships ` +
        'both redis-server and redis-cli).',
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Ports and probes
// ---------------------------------------------------------------------------------------------

/**
 * Ports this process has already handed out. The OS may give a just-closed port to the next
 * bind(0), so launching several servers at once could otherwise pick the same port twice.
 */
const handedOut = new Set<number>();

function bindAndRelease(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, HOST, () => {
      const address = server.address();
      const bound = address !== null && typeof address === 'object' ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/** A loopback port that was free a moment ago (the caller retries if it is taken meanwhile). */
export async function findFreePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await bindAndRelease(0);
    if (port !== undefined && !handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`could not find a free port on ${HOST}`);
}

/**
 * A free port whose cluster-bus twin (port + 10000) is free and valid too: the ephemeral range
 * reaches 60999 on Linux, and a node on 56000 would need a bus on 66000, which cannot exist.
 * Choosing the pair this way works on every Redis version (cluster-port only exists since 7.0).
 */
async function findFreeClusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await bindAndRelease(0);
    if (port === undefined || handedOut.has(port)) continue;
    const bus = port + CLUSTER_BUS_OFFSET;
    if (bus > 65_535 || handedOut.has(bus)) continue;
    if ((await bindAndRelease(bus)) !== bus) continue;
    handedOut.add(port);
    handedOut.add(bus);
    return port;
  }
  throw new Error(`could not find a free port pair (port, port + 10000) on ${HOST}`);
}

/**
 * True if host:port answers an inline PING with +PONG within timeoutMs. A raw socket rather than
 * ioredis so a closed port costs one refused connection, not a reconnect loop and error logs.
 */
export function pingRedis(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let reply = '';
    let settled = false;
    const finish = (ok: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1');
      if (reply.includes('\r\n')) finish(reply.startsWith('+PONG'));
    });
    socket.once('error', () => finish(false));
    socket.once('close', () => finish(false));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ---------------------------------------------------------------------------------------------
// Single server
// ---------------------------------------------------------------------------------------------

/**
 * Set by globalSetup to a directory private to one Jest run. Every server started during the run
 * keeps its --dir (and a pid file) under it, so globalTeardown can kill servers a test forgot to
 * stop. An exit hook cannot do that job: Jest hands test files a copy of `process`, whose 'exit'
 * listeners never fire. Scoping by run keeps parallel Jest runs from reaping each other's servers.
 */
export const RUN_DIR_ENV = 'IDEMPOTENCY_TEST_RUN_DIR';
const PID_FILE = 'redis-server.pid';

function activeRunDir(): string | undefined {
  const runDir = process.env[RUN_DIR_ENV];
  return runDir !== undefined && runDir !== '' && existsSync(runDir) ? runDir : undefined;
}

/** process.kill that tolerates a process which is already gone. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

class PortInUseError extends Error {}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function launch(port: number, extraArgs: readonly string[]): Promise<RedisProcess> {
  const runDir = activeRunDir();
  const dir = await mkdtemp(
    runDir !== undefined ? join(runDir, 'redis-') : join(tmpdir(), 'nestjs-idempotency-redis-'),
  );
  const args = [
    '--bind',
    HOST,
    '--port',
    String(port),
    // An empty argument is `--save ""`: no RDB snapshots, nothing written behind the test's back.
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    ...extraArgs,
  ];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });

  let output = '';
  let exitInfo: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, sig) => {
      exitInfo = sig !== null ? `signal ${sig}` : `code ${String(code)}`;
      resolve();
    });
  });

  let markReady!: () => void;
  let markFailed!: (error: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markFailed = reject;
  });
  let settled = false;
  const settle = (error?: Error): void => {
    if (settled) return;
    settled = true;
    if (error) markFailed(error);
    else markReady();
  };

  // Keep draining both pipes for the process's whole life: a full pipe would block redis-server.
  const onOutput = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-OUTPUT_LIMIT);
    if (output.includes(READY_LINE)) settle();
  };
  child.stdout.on('data', onOutput);
  child.stderr.on('data', onOutput);
  if (runDir !== undefined) {
    // globalTeardown reaps a server a test forgot to stop, so such a server need not (and should
    // not) keep the worker alive. Outside a run nobody would reap it, so there it stays
    // referenced and Jest's "did not exit" warning points at the leak.
    child.unref();
    // Piped stdio is a net.Socket at runtime, though typed as a plain Readable.
    (child.stdout as Socket).unref();
    (child.stderr as Socket).unref();
  }

  const explain = (what: string): string =>
    `redis-server on ${HOST}:${port} ${what} (args: ${args.join(' ')}).\n--- output ---\n${output}`;

  child.once('error', (error: NodeJS.ErrnoException) => {
    settle(
      error.code === 'ENOENT'
        ? new Error(`redis-server is not on PATH (${error.message}). ${MISSING_REDIS_MESSAGE}`)
        : error,
    );
  });
  void exited.then(() => {
    const message = explain(`exited with ${exitInfo ?? 'unknown status'} before it was ready`);
    settle(
      /address already in use/i.test(output) ? new PortInUseError(message) : new Error(message),
    );
  });

  // Fallback to the log line: extra args such as `--loglevel warning` silence it, so also probe
  // with PING, backing off, until ready or settled otherwise.
  void (async () => {
    for (let delay = 20; !settled; delay = Math.min(delay * 2, 250)) {
      await sleep(delay);
      if (!settled && (await pingRedis(HOST, port, 250))) settle();
    }
  })();

  const timer = setTimeout(
    () => settle(new Error(explain(`was not ready within ${READY_TIMEOUT_MS} ms`))),
    READY_TIMEOUT_MS,
  );

  const pid = child.pid;
  // Written synchronously, before anything can fail, so the reaper sees every server.
  if (pid !== undefined) writeFileSync(join(dir, PID_FILE), String(pid));

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (pid !== undefined && exitInfo === undefined) {
        signal(pid, 'SIGTERM');
        if ((await withTimeout(exited, STOP_GRACE_MS)) === 'timeout') {
          signal(pid, 'SIGKILL');
          if ((await withTimeout(exited, KILL_WAIT_MS)) === 'timeout') {
            throw new Error(`redis-server pid ${pid} survived SIGKILL for ${KILL_WAIT_MS} ms`);
          }
        }
      }
      await rm(dir, { recursive: true, force: true });
    })();
    return stopping;
  };

  try {
    await ready;
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  if (pid === undefined) throw new Error(explain('started without a pid')); // unreachable in practice

  return { host: HOST, port, url: `redis://${HOST}:${port}`, pid, dir, stop };
}

/**
 * Starts redis-server on a free port; retries on a fresh port if another process grabbed the
 * chosen one between our probe and redis-server's bind.
 */
async function launchOnFreePort(
  extraArgs: readonly string[],
  pickPort: () => Promise<number>,
): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await pickPort();
    try {
      return await launch(port, extraArgs);
    } catch (error) {
      if (!(error instanceof PortInUseError) || attempt >= PORT_ATTEMPTS) throw error;
    }
  }
}

/** Starts a throwaway redis-server on `port`, or on a free loopback port when none is given. */
export async function startRedisServer(
  options: { args?: string[]; port?: number } = {},
): Promise<RedisProcess> {
  requireExecutable('redis-server', 'start a throwaway Redis');
  if (options.port !== undefined) return launch(options.port, options.args ?? []);
  return launchOnFreePort(options.args ?? [], findFreePort);
}

// ---------------------------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------------------------

const CLUSTER_ARGS = [
  '--cluster-enabled',
  'yes',
  '--cluster-config-file',
  'nodes.conf', // relative to --dir, so each node's state lives in its own tmp dir
  '--cluster-node-timeout',
  '2000',
  // Redis 7 syncs replicas diskless after a 5 s grace period by default; with replicas that
  // delay would dominate cluster start-up, and nothing else ever attaches to these masters.
  '--repl-diskless-sync-delay',
  '0',
];

function runRedisCli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'redis-cli',
      args,
      { timeout: CLUSTER_CREATE_TIMEOUT_MS, maxBuffer: 4 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) {
          reject(
            new Error(
              `redis-cli ${args.join(' ')} failed: ${error.message}\n--- stdout ---\n${stdout}` +
                `\n--- stderr ---\n${stderr}`,
            ),
          );
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

interface ClusterNodeLine {
  id: string;
  flags: string[];
  masterId: string;
}

function parseClusterNodes(text: string): ClusterNodeLine[] {
  return text
    .split(/\r?\n/)
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id = '', , flags = '', masterId = '-'] = line.split(' ');
      return { id, flags: flags.split(','), masterId };
    });
}

/** Why this node's view of the cluster is not ready yet, or undefined if it is. */
async function clusterProblem(
  client: Redis,
  label: string,
  expected: { masters: number; replicas: number },
): Promise<string | undefined> {
  const total = expected.masters * (1 + expected.replicas);
  const info = parseInfo(await client.cluster('INFO'));
  if (info.get('cluster_state') !== 'ok') {
    return `${label}: cluster_state:${info.get('cluster_state') ?? '?'}`;
  }
  if (info.get('cluster_slots_assigned') !== String(TOTAL_SLOTS)) {
    return `${label}: cluster_slots_assigned:${info.get('cluster_slots_assigned') ?? '?'}`;
  }
  if (info.get('cluster_known_nodes') !== String(total)) {
    return `${label}: knows ${info.get('cluster_known_nodes') ?? '?'} of ${total} nodes`;
  }
  if (expected.replicas === 0) return undefined;

  const nodes = parseClusterNodes(String(await client.cluster('NODES')));
  const masters = nodes.filter((node) => node.flags.includes('master'));
  if (masters.length !== expected.masters) {
    return `${label}: sees ${masters.length} of ${expected.masters} masters`;
  }
  for (const master of masters) {
    const replicaCount = nodes.filter(
      (node) => node.flags.includes('slave') && node.masterId === master.id,
    ).length;
    if (replicaCount < expected.replicas) {
      return `${label}: master ${master.id} has ${replicaCount} of ${expected.replicas} replicas`;
    }
  }
  // A replica that is listed but has not finished its initial sync would make WAIT-based or
  // failover tests flaky, so wait for the link as well.
  const replication = parseInfo(await client.info('replication'));
  if (replication.get('role') === 'slave' && replication.get('master_link_status') !== 'up') {
    return `${label}: replica link ${replication.get('master_link_status') ?? '?'}`;
  }
  return undefined;
}

async function waitForCluster(
  processes: RedisProcess[],
  expected: { masters: number; replicas: number },
): Promise<void> {
  const clients = processes.map((p) => {
    // No reconnect loop or offline queue: a failing check should fail fast and be polled again.
    const client = new Redis({
      host: p.host,
      port: p.port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined); // errors surface through the rejected commands instead
    return client;
  });
  try {
    await Promise.all(clients.map((client) => client.connect()));
    const deadline = Date.now() + CLUSTER_READY_TIMEOUT_MS;
    for (let delay = 25; ; delay = Math.min(delay * 2, 500)) {
      const problems = await Promise.all(
        clients.map((client, i) =>
          clusterProblem(client, `${HOST}:${processes[i]?.port}`, expected).catch(
            (error: Error) => `${HOST}:${processes[i]?.port}: ${error.message}`,
          ),
        ),
      );
      const problem = problems.find((p) => p !== undefined);
      if (problem === undefined) return;
      if (Date.now() + delay > deadline) {
        throw new Error(
          `Redis Cluster was not ready within ${CLUSTER_READY_TIMEOUT_MS} ms: ${problem}`,
        );
      }
      await sleep(delay);
    }
  } finally {
    for (const client of clients) client.disconnect();
  }
}

async function stopAll(processes: RedisProcess[]): Promise<void> {
  const results = await Promise.allSettled(processes.map((p) => p.stop()));
  const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failures.length > 0) {
    throw new AggregateError(
      failures.map((f) => f.reason as unknown),
      `failed to stop ${failures.length} redis-server process(es)`,
    );
  }
}

export async function startRedisCluster(
  options: { masters?: number; replicas?: number } = {},
): Promise<RedisClusterProcesses> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  if (!Number.isInteger(masters) || masters < 3) {
    throw new Error(`a Redis Cluster needs at least 3 masters (got ${masters})`);
  }
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new Error(`replicas must be a non-negative integer (got ${replicas})`);
  }
  requireExecutable('redis-server', 'start Redis Cluster nodes');
  requireExecutable('redis-cli', 'form a Redis Cluster (redis-cli --cluster create)');

  const total = masters * (1 + replicas);
  const processes: RedisProcess[] = [];
  try {
    const started = await Promise.allSettled(
      Array.from({ length: total }, () => launchOnFreePort(CLUSTER_ARGS, findFreeClusterPort)),
    );
    for (const result of started) {
      if (result.status === 'fulfilled') processes.push(result.value);
    }
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;

    await runRedisCli([
      '--cluster',
      'create',
      ...processes.map((p) => `${p.host}:${p.port}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    await waitForCluster(processes, { masters, replicas });
  } catch (error) {
    await stopAll(processes).catch(() => undefined);
    throw error;
  }

  return {
    nodes: processes.map((p) => ({ host: p.host, port: p.port })),
    processes,
    stop: () => stopAll(processes),
  };
}

/** Whether pid is (still) a redis-server, so a recycled pid is never killed by mistake. */
function isRedisServer(pid: number): boolean {
  try {
    if (existsSync('/proc')) {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // A zombie has already exited; its cmdline is empty. (Field 3 follows the ")" of the name.)
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('redis-server');
    }
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).includes(
      'redis-server',
    );
  } catch {
    return false; // no such process
  }
}

/**
 * SIGKILLs every redis-server still running from the given run directory (see RUN_DIR_ENV) and
 * returns their pids. Only pids this module recorded there are candidates.
 */
export async function reapLeftoverRedisServers(runDir: string): Promise<number[]> {
  const entries = await readdir(runDir).catch(() => [] as string[]);
  const killed: number[] = [];
  for (const entry of entries) {
    const pid = Number(await readFile(join(runDir, entry, PID_FILE), 'utf8').catch(() => ''));
    if (Number.isInteger(pid) && pid > 0 && isRedisServer(pid)) {
      signal(pid, 'SIGKILL');
      killed.push(pid);
    }
  }
  return killed;
}

// ---------------------------------------------------------------------------------------------
// The suite's Redis
// ---------------------------------------------------------------------------------------------

/**
 * The Redis the suite uses: REDIS_URL if set; else a Redis already answering on 127.0.0.1:6379
 * (used, never managed); else a throwaway redis-server, which the caller must stop.
 */
export async function resolveTestRedis(): Promise<TestRedis> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv !== undefined && fromEnv !== '') return { url: fromEnv };
  if (await pingRedis(HOST, 6379, LOCAL_PING_TIMEOUT_MS)) return { url: `redis://${HOST}:6379` };
  if (!hasRedisServer()) throw new Error(MISSING_REDIS_MESSAGE);
  const server = await startRedisServer();
  return { url: server.url, stop: () => server.stop() };
}
