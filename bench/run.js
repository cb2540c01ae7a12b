// npm run bench: a private redis-server, the apps under test (this library on Redis and on the
// memory store, @node-idempotency/nestjs on its own NestJS 10) and the load generator (autocannon)
// each run as their own process. Measures round trips and stored bytes first (on a near-empty
// Redis), then wait-mode latency, then throughput in interleaved rounds; prints tables and the
// targets, writes bench/results/latest.json and latest.svg. Knobs: see bench/README.md.
const { execFile, spawn, spawnSync } = require('node:child_process');
const { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const http = require('node:http');
const { createServer } = require('node:net');
const os = require('node:os');
const { join } = require('node:path');
const { performance } = require('node:perf_hooks');
const Redis = require('ioredis').default;
const { renderChart } = require('./chart');
const { fingerprintCost } = require('./fingerprint');
const { scaleMeasures } = require('./scale');

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const DURATION = env('BENCH_DURATION', 2);
const WARMUP = env('BENCH_WARMUP', 1);
const CONNECTIONS = env('BENCH_CONNECTIONS', 20);
const ROUNDS = env('BENCH_ROUNDS', 5);
const WAIT_KEYS = env('BENCH_WAIT_KEYS', 200);
const WAITERS = env('BENCH_WAITERS', 20);
const WAIT_SETTLE_MS = env('BENCH_WAIT_SETTLE_MS', 30);
const RT_REQUESTS = 50;
const PEER_DIR = join(__dirname, 'peer');
const RESULTS = join(__dirname, 'results');

const children = [];
// Never leave a Redis or an app behind, even when the run dies.
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.timeOrigin + performance.now();

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

function start(command, args, env, ready) {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = ready.exec(out);
      if (match) resolve({ match, out, pid: child.pid });
    });
    child.on('exit', (code) => reject(new Error(`${command} exited with ${code}: ${out}`)));
  });
}

/** bench/peer has its own NestJS 10; install it from its lockfile on first use. */
function ensurePeer() {
  if (existsSync(join(PEER_DIR, 'node_modules', '@node-idempotency', 'nestjs'))) return;
  console.error('Installing bench/peer (npm ci --prefix bench/peer) ...');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--prefix', PEER_DIR, '--no-audit', '--no-fund'], {
    stdio: ['ignore', 2, 2],
  });
  if (result.status !== 0) throw new Error('npm ci --prefix bench/peer failed');
}

// --- HTTP from this process (round trips, stored bytes, wait mode) ---------------------------

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
/** POSTs JSON; resolves with status, headers, body and the moment the last byte arrived. */
function post(base, path, { key, body = { amount: 100 } } = {}) {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...(key && { 'idempotency-key': key }),
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            headers: res.headers,
            body: Buffer.concat(chunks),
            receivedAt: now(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

// --- Load (autocannon, its own process) ------------------------------------------------------

function autocannon(url, { key, uniqueKey = false, duration, body = '{"amount":100}' }) {
  const config = JSON.stringify({
    url,
    connections: CONNECTIONS,
    duration,
    headers: key ? { 'idempotency-key': key } : {},
    body,
    uniqueKey,
  });
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [join(__dirname, 'load.js'), config],
      { maxBuffer: 64 << 20 },
      (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout))),
    ),
  );
}

// --- Redis round trips per request (MONITOR: commands sent by clients, not by scripts) -------

async function commandsPerRequest(monitor, action, n) {
  const seen = {};
  const count = (time, args, source) => {
    if (source === 'lua') return; // run inside a script: no round trip of its own
    const name = String(args[0]).toLowerCase();
    seen[name] = (seen[name] ?? 0) + 1;
  };
  monitor.on('monitor', count);
  for (let i = 0; i < n; i++) await action(i);
  await sleep(200); // MONITOR lines arrive after the replies
  monitor.off('monitor', count);
  const perRequest = Object.fromEntries(
    Object.entries(seen).map(([name, calls]) => [name, round(calls / n, 2)]),
  );
  return { total: round(sum(Object.values(seen)) / n, 2), commands: perRequest };
}

async function roundTrips(monitor, base, { wait }) {
  const id = `${Date.now()}`;
  const replayKey = `rt-replay-${id}`;
  const holdKey = `rt-hold-${id}`;
  await post(base, '/idempotent', { key: replayKey });
  await post(base, '/idempotent', { key: `rt-warm-${id}` });
  const held = post(base, '/hold', { key: holdKey });
  await post(base, '/control/held', { body: { key: holdKey } });
  const result = {
    'first execution': await commandsPerRequest(
      monitor,
      (i) => post(base, '/idempotent', { key: `rt-first-${id}-${i}` }),
      RT_REQUESTS,
    ),
    replay: await commandsPerRequest(
      monitor,
      () => post(base, '/idempotent', { key: replayKey }),
      RT_REQUESTS,
    ),
    'conflict (409)': await commandsPerRequest(
      monitor,
      () => post(base, '/hold', { key: holdKey }),
      RT_REQUESTS,
    ),
    'mismatch (422)': await commandsPerRequest(
      monitor,
      () => post(base, '/idempotent', { key: replayKey, body: { amount: 1 } }),
      RT_REQUESTS,
    ),
  };
  await post(base, '/control/release', { body: { key: holdKey } });
  await held;
  if (wait) {
    // One holder and one waiter, the whole exchange; the waiter's share is this minus a first
    // execution. Once unmeasured first: the subscriber connection opens on first use.
    const exchange = async (i) => {
        const key = `rt-wait-${id}-${i}`;
        const holder = post(base, '/hold-wait', { key });
        await post(base, '/control/held', { body: { key } });
        const waiter = post(base, '/hold-wait', { key });
        await sleep(10);
        await post(base, '/control/release', { body: { key } });
        await Promise.all([holder, waiter]);
    };
    await exchange('warm');
    result['wait: holder + 1 waiter'] = await commandsPerRequest(monitor, exchange, 20);
  }
  return result;
}

// --- Stored bytes per record (MEMORY USAGE of the keys the request created) ------------------

async function allKeys(redis) {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return new Set(keys);
}

async function valueBytes(redis, key) {
  const type = await redis.type(key);
  if (type === 'string') return redis.strlen(key);
  if (type === 'hash') {
    const fields = await redis.hgetallBuffer(key);
    return sum(Object.entries(fields).map(([field, value]) => Buffer.byteLength(field) + value.length));
  }
  return 0;
}

async function storedBytes(redis, base) {
  const measure = async (size) => {
    const before = await allKeys(redis);
    const body = size ? { amount: 100, size } : { amount: 100 };
    const response = await post(base, '/idempotent', { key: `bytes-${size}-${Date.now()}`, body });
    if (response.status >= 300) throw new Error(`stored bytes: ${response.status} ${response.body}`);
    const keys = [...(await allKeys(redis))].filter((key) => !before.has(key));
    let stored = 0;
    let payload = 0; // names and values alone, before Redis's and the allocator's overhead
    for (const key of keys) {
      stored += await redis.memory('USAGE', key, 'SAMPLES', 0);
      payload += Buffer.byteLength(key) + (await valueBytes(redis, key));
    }
    const raw = response.body.length;
    return {
      responseBytes: raw,
      storedBytes: stored,
      payloadBytes: payload,
      keys: keys.length,
      ratio: round(stored / raw, 3),
    };
  };
  return { '200 B': await measure(0), '100 KB': await measure(100_000) };
}

// --- Wait mode: holder completes, N waiters get its response replayed -----------------------

async function waitLatency(base, label) {
  const id = `${label}-${Date.now()}`;
  const delays = [];
  const holderDelays = [];
  const other = {};
  for (let i = 0; i < WAIT_KEYS; i++) {
    const key = `wait-${id}-${i}`;
    const holder = post(base, '/hold-wait', { key });
    const started = await Promise.race([
      post(base, '/control/held', { body: { key } }),
      holder.then((r) => ({ holderDone: r })),
    ]);
    if (started.holderDone) {
      return { available: false, reason: `/hold-wait answered ${started.holderDone.status}` };
    }
    const waiters = Array.from({ length: WAITERS }, () => post(base, '/hold-wait', { key }));
    await sleep(WAIT_SETTLE_MS); // let every duplicate reach the server and start waiting
    await post(base, '/control/release', { body: { key } });
    const [first, ...rest] = await Promise.all([holder, ...waiters]);
    const { completedAt } = JSON.parse(first.body);
    holderDelays.push(first.receivedAt - completedAt);
    for (const response of rest) {
      if (response.status < 300 && response.headers['idempotent-replayed']) {
        delays.push(response.receivedAt - completedAt);
      } else {
        other[response.status] = (other[response.status] ?? 0) + 1;
      }
    }
    if (i === 0 && delays.length === 0) {
      return {
        available: false,
        reason: `duplicates answered ${Object.keys(other).join(', ')} instead of waiting`,
      };
    }
  }
  return {
    available: true,
    keys: WAIT_KEYS,
    waitersPerKey: WAITERS,
    replayed: delays.length,
    notReplayed: other,
    ms: percentiles(delays),
    holderOwnMs: percentiles(holderDelays),
  };
}

// --- Statistics ------------------------------------------------------------------------------

const sum = (values) => values.reduce((a, b) => a + b, 0);
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;
const sorted = (values) => [...values].sort((a, b) => a - b);
const quantile = (values, q) => {
  const s = sorted(values);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
const median = (values) => {
  const s = sorted(values);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
const spread = (values) => ({
  median: round(median(values), 3),
  min: round(Math.min(...values), 3),
  max: round(Math.max(...values), 3),
});
const percentiles = (values) => ({
  p50: round(quantile(values, 0.5)),
  p90: round(quantile(values, 0.9)),
  p99: round(quantile(values, 0.99)),
  max: round(Math.max(...values)),
});

// --- Throughput ------------------------------------------------------------------------------

const SCENARIOS = {
  baseline: { label: 'a. baseline', path: 'baseline' },
  // Nest's interceptor pipeline around the same handler, with an interceptor that does nothing:
  // the ceiling of any interceptor-based library.
  floor: { label: "a'. no-op interceptor", path: 'intercepted' },
  first: { label: 'b. first execution', path: 'idempotent', uniqueKey: true },
  replay: { label: 'c. replay', path: 'idempotent', replay: true },
  conflict: { label: 'd. conflict (409)', path: 'hold', conflict: true },
  // The key reused with another body (422), against a ~200 B and a ~900 KB stored response.
  mismatch: { label: 'e. key reused (422)', path: 'idempotent', stored: { amount: 100 } },
  mismatchLarge: { label: "e'. 422 vs 900 KB", path: 'idempotent', stored: { size: 900_000 } },
};
const HANDLERS = { trivial: 'trivial handler', io: '~5 ms I/O handler' };

/** CPU time a process has used, in µs (Linux /proc; undefined elsewhere). */
function cpuMicros(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** redis-server's CPU time, in µs (INFO cpu). */
async function redisMicros(redis) {
  const info = await redis.info('cpu');
  const used = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (used('used_cpu_user') + used('used_cpu_sys')) * 1e6;
}

async function throughput(targets, redis) {
  const runs = [];
  for (const handler of Object.keys(HANDLERS)) {
    for (const target of targets) {
      for (const name of target.scenarios) {
        // A duplicate in conflict never reaches the handler: measured once, with the trivial one.
        if (name === 'conflict' && handler === 'io') continue;
        const scenario = SCENARIOS[name];
        const path = scenario.conflict ? scenario.path : `${scenario.path}${handler === 'io' ? '-io' : ''}`;
        let key;
        if (scenario.replay) {
          key = `replay-${target.id}-${handler}-${Date.now()}`;
          await post(target.base, `/${path}`, { key });
        }
        if (scenario.conflict) {
          key = `conflict-${target.id}-${Date.now()}`;
          target.held.push({ key, response: post(target.base, `/${path}`, { key }) });
          await post(target.base, '/control/held', { body: { key } });
        }
        if (scenario.stored) {
          if (handler === 'io') continue; // answered from the store alone: one handler is enough
          key = `${name}-${target.id}-${Date.now()}`;
          await post(target.base, `/${path}`, { key, body: scenario.stored });
        }
        runs.push({
          target: target.id,
          handler,
          scenario: name,
          samples: [],
          run: (duration) =>
            autocannon(`${target.base}/${path}`, {
              key,
              uniqueKey: !!scenario.uniqueKey,
              duration,
              ...(scenario.stored && { body: '{"amount":7}' }),
            }),
        });
      }
    }
  }
  const started = Date.now();
  if (WARMUP > 0) {
    process.stderr.write(`warm-up: ${runs.length} scenarios x ${WARMUP} s\n`);
    for (const run of runs) await run.run(WARMUP);
  }
  for (let r = 0; r < ROUNDS; r++) {
    // Every round runs every scenario once; odd rounds in reverse, so drift hits all alike.
    const order = r % 2 ? [...runs].reverse() : runs;
    process.stderr.write(`round ${r + 1}/${ROUNDS}: ${runs.length} scenarios x ${DURATION} s\n`);
    for (const run of order) {
      const target = targets.find((t) => t.id === run.target);
      const [appBefore, redisBefore] = [cpuMicros(target.pid), await redisMicros(redis)];
      const result = await run.run(DURATION);
      const [appAfter, redisAfter] = [cpuMicros(target.pid), await redisMicros(redis)];
      const requests = result.requests.total;
      run.samples[r] = {
        // CPU per request, of the app process and of the Redis server (0 for the memory store's).
        appCpuUs: appBefore === undefined ? undefined : (appAfter - appBefore) / requests,
        redisCpuUs: (redisAfter - redisBefore) / requests,
        rps: result.requests.average,
        p50: result.latency.p50,
        p99: result.latency.p99,
        non2xx: result.non2xx,
        errors: result.errors + result.timeouts,
      };
    }
  }
  for (const target of targets) {
    for (const { key, response } of target.held) {
      await post(target.base, '/control/release', { body: { key } });
      await response;
    }
  }
  return { runs, seconds: Math.round((Date.now() - started) / 1000) };
}

function summarise(runs, targets) {
  const find = (target, handler, scenario) =>
    runs.find((r) => r.target === target && r.handler === handler && r.scenario === scenario);
  const rows = runs.map((run) => {
    const base = find(run.target, run.handler, 'baseline');
    const ratios = run.samples.map((s, i) => s.rps / base.samples[i].rps);
    return {
      target: run.target,
      handler: run.handler,
      scenario: run.scenario,
      reqPerSec: spread(run.samples.map((s) => s.rps)),
      reqPerSecRounds: run.samples.map((s) => Math.round(s.rps)),
      p50: median(run.samples.map((s) => s.p50)),
      p99: median(run.samples.map((s) => s.p99)),
      appCpuUs: run.samples[0].appCpuUs === undefined ? undefined : round(median(run.samples.map((s) => s.appCpuUs)), 0),
      redisCpuUs: round(median(run.samples.map((s) => s.redisCpuUs)), 0),
      non2xx: sum(run.samples.map((s) => s.non2xx)),
      errors: sum(run.samples.map((s) => s.errors)),
      ratio: spread(ratios),
    };
  });
  // Our ratio over the peer's, paired per round (both measured within the same round).
  const versusPeer = {};
  if (targets.some((t) => t.id === 'peer-redis')) {
    for (const handler of Object.keys(HANDLERS)) {
      for (const scenario of ['first', 'replay']) {
        const ours = rows.find((r) => r.target === 'ours-redis' && r.handler === handler && r.scenario === scenario);
        const peer = rows.find((r) => r.target === 'peer-redis' && r.handler === handler && r.scenario === scenario);
        const oursRounds = find('ours-redis', handler, scenario).samples;
        const oursBase = find('ours-redis', handler, 'baseline').samples;
        const peerRounds = find('peer-redis', handler, scenario).samples;
        const peerBase = find('peer-redis', handler, 'baseline').samples;
        const paired = oursRounds.map(
          (s, i) => s.rps / oursBase[i].rps / (peerRounds[i].rps / peerBase[i].rps),
        );
        versusPeer[`${handler}/${scenario}`] = {
          ours: ours.ratio.median,
          peer: peer.ratio.median,
          oursOverPeer: spread(paired),
        };
        // The same, with this library on the peer's NestJS (same framework, same Express).
        if (targets.some((t) => t.id === 'ours-peer-nest')) {
          const sameRounds = find('ours-peer-nest', handler, scenario).samples;
          const sameBase = find('ours-peer-nest', handler, 'baseline').samples;
          versusPeer[`${handler}/${scenario}`].onPeerNest = spread(
            sameRounds.map((s, i) => s.rps / sameBase[i].rps / (peerRounds[i].rps / peerBase[i].rps)),
          );
        }
      }
    }
  }
  return { rows, versusPeer };
}

function targetsOf(summary, bytes, wait, scale) {
  const row = (target, handler, scenario) =>
    summary.rows.find((r) => r.target === target && r.handler === handler && r.scenario === scenario);
  const out = [];
  const add = (name, value, goal, pass, unit = 'x', detail) =>
    out.push({
      target: name,
      measured: value === undefined ? null : round(value, 2),
      goal,
      result: value === undefined ? 'N/A' : !pass ? 'INFO' : pass(value) ? 'PASS' : 'MISS',
      unit,
      ...(detail && { detail }),
    });
  for (const handler of Object.keys(HANDLERS)) {
    const h = handler === 'io' ? '~5 ms I/O' : 'trivial';
    // On the same framework: this library on the peer's NestJS 10 against the peer.
    for (const scenario of ['replay', 'first']) {
      const ours = row('ours-peer-nest', handler, scenario);
      const peer = row('peer-redis', handler, scenario);
      if (!ours || !peer) continue;
      const what = scenario === 'first' ? 'first execution' : 'replay';
      add(`${what}: app CPU per request, NestJS 10 (${h})`, ours.appCpuUs, `<= ${peer.appCpuUs} µs (peer)`,
        (v) => v <= peer.appCpuUs, 'µs');
      if (scenario === 'replay') {
        add(`replay: ratio to baseline, NestJS 10 (${h})`, ours.ratio.median, `>= ${peer.ratio.median}x (peer)`,
          (v) => v >= peer.ratio.median);
      }
    }
    const first = row('ours-redis', handler, 'first');
    const floor = row('ours-redis', handler, 'floor');
    if (first && floor) {
      add(`first execution ratio / no-op interceptor's (${h})`, first.ratio.median / floor.ratio.median, '>= 0.85x',
        (v) => v >= 0.85, 'x', `first ${first.ratio.median}x, no-op ${floor.ratio.median}x of the baseline`);
    }
  }
  const replay = row('ours-redis', 'trivial', 'replay');
  for (const scenario of ['conflict', 'mismatch', 'mismatchLarge']) {
    const r = row('ours-redis', 'trivial', scenario);
    if (r && replay) {
      add(`Redis CPU per request, ${SCENARIOS[scenario].label}`, r.redisCpuUs, `<= ${replay.redisCpuUs} µs (replay)`,
        (v) => v <= replay.redisCpuUs, 'µs');
    }
  }
  for (const [scenario, c] of Object.entries(scale?.cluster?.ratios ?? {})) {
    const single = row('ours-redis', 'trivial', scenario)?.ratio.median;
    if (!single) continue;
    add(`4 processes: ${scenario} ratio / 1 process's`, c / single, '0.90x to 1.10x', (v) => v >= 0.9 && v <= 1.1,
      'x', `4 processes ${c}x, 1 process ${single}x of the baseline`);
  }
  if (scale?.records) {
    const r = scale.records;
    add(`Redis memory per record, ${r.records} records of a ${r.responseBytes} B response`, r.bytesPerRecord,
      'measured', undefined, 'B');
    add('claim p99 with 1 M records / empty', r.p99Full / r.p99Empty, '<= 1.25x', (v) => v <= 1.25, 'x',
      `p99 ${r.p99Empty} ms empty, ${r.p99Full} ms with ${r.records} records`);
  }
  if (bytes) {
    add('stored bytes / response, 200 B JSON', bytes['200 B'].ratio, '<= 2x', (v) => v <= 2);
    add(
      'compression (response / stored), 100 KB JSON',
      bytes['100 KB'].responseBytes / bytes['100 KB'].storedBytes,
      '>= 5x',
      (v) => v >= 5,
      'x',
      // MEMORY USAGE counts the allocator's size class too; the stored bytes alone, for scale.
      `payload alone ${(bytes['100 KB'].responseBytes / bytes['100 KB'].payloadBytes).toFixed(2)}x`,
    );
  }
  for (const [store, result] of Object.entries(wait)) {
    add(`wait mode p99, ${store}`, result.available ? result.ms.p99 : undefined, '<= 10 ms', (v) => v <= 10, 'ms');
  }
  return out;
}

// --- Output ----------------------------------------------------------------------------------

const pad = (value, width) => String(value).padStart(width);
function printThroughput(rows, targets) {
  const label = Object.fromEntries(targets.map((t) => [t.id, t.label]));
  for (const [handler, title] of Object.entries(HANDLERS)) {
    console.log(`\n${title}: median of ${ROUNDS} rounds x ${DURATION} s, ${CONNECTIONS} connections`);
    console.log(
      `${'library, store'.padEnd(38)} ${'scenario'.padEnd(22)} ${pad('req/s', 7)} ${pad('min-max', 13)} ${pad('p50', 4)} ${pad('p99', 4)} ${pad('ratio', 6)} ${pad('min-max', 11)} ${pad('app µs', 6)} ${pad('redis µs', 8)} non-2xx`,
    );
    for (const r of rows.filter((row) => row.handler === handler)) {
      console.log(
        `${label[r.target].padEnd(38)} ${SCENARIOS[r.scenario].label.padEnd(22)} ${pad(Math.round(r.reqPerSec.median), 7)} ${pad(`${Math.round(r.reqPerSec.min)}-${Math.round(r.reqPerSec.max)}`, 13)} ${pad(r.p50, 4)} ${pad(r.p99, 4)} ${pad(r.ratio.median.toFixed(2), 6)} ${pad(`${r.ratio.min.toFixed(2)}-${r.ratio.max.toFixed(2)}`, 11)} ${pad(r.appCpuUs ?? '-', 6)} ${pad(r.redisCpuUs, 8)} ${r.non2xx}${r.errors ? ` (${r.errors} errors)` : ''}`,
      );
    }
  }
}

function versions(redisInfo) {
  const read = (path) => JSON.parse(readFileSync(path, 'utf8')).version;
  const git = (args) => spawnSync('git', args, { cwd: join(__dirname, '..'), encoding: 'utf8' }).stdout.trim();
  return {
    node: process.version,
    redis: /redis_version:(\S+)/.exec(redisInfo)?.[1],
    nestjs: read(require.resolve('@nestjs/core/package.json')),
    peer: read(join(PEER_DIR, 'node_modules/@node-idempotency/nestjs/package.json')),
    peerNestjs: read(join(PEER_DIR, 'node_modules/@nestjs/core/package.json')),
    autocannon: read(require.resolve('autocannon/package.json')),
    commit: git(['rev-parse', '--short', 'HEAD']),
    // Uncommitted library changes measured too (the working tree is shared while it changes).
    libraryChangesUncommitted: git(['status', '--porcelain', '--', 'lib', 'lua']) !== '',
  };
}

async function main() {
  ensurePeer();
  const loadBefore = os.loadavg()[0];
  const dir = mkdtempSync(join(os.tmpdir(), 'bench-redis-'));
  const redisPort = await freePort();
  await start(
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    {},
    /Ready to accept connections/,
  );
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const redis = new Redis(redisUrl);
  const app = async (script, store, prefix, env = {}) => {
    const { match, out, pid } = await start(
      process.execPath,
      [script],
      { STORE: store, REDIS_URL: redisUrl, KEY_PREFIX: prefix, ...env },
      /READY (\d+)/,
    );
    const missing = [...out.matchAll(/^MISSING (.*)$/gm)].map((m) => m[1]);
    return { base: `http://127.0.0.1:${match[1]}`, missing, pid };
  };
  const oursRedis = await app(join(__dirname, 'app.js'), 'redis', 'bench:');
  const oursMemory = await app(join(__dirname, 'app.js'), 'memory', 'bench:');
  const peer = await app(join(PEER_DIR, 'app.js'), 'redis', 'peer');
  // This library on the peer's NestJS 10 too: a copy of dist/ inside bench/peer resolves it, so
  // the two libraries can also be compared on the same framework.
  const onPeerNest = join(PEER_DIR, 'ours-dist');
  rmSync(onPeerNest, { recursive: true, force: true });
  cpSync(join(__dirname, '..', 'dist'), onPeerNest, { recursive: true });
  const oursNest10 = await app(join(__dirname, 'app.js'), 'redis', 'bench10:', { LIBRARY: onPeerNest });
  // The PostgreSQL store, when one answers (BENCH_POSTGRES_URL; the tests' database by default).
  const postgres = await postgresLane(app);
  const info = versions(await redis.info('server'));
  const targets = [
    { id: 'ours-redis', label: 'nestjs-idempotency, Redis', base: oursRedis.base, pid: oursRedis.pid, scenarios: ['baseline', 'floor', 'first', 'replay', 'conflict'], held: [] },
    { id: 'ours-memory', label: 'nestjs-idempotency, memory store', base: oursMemory.base, pid: oursMemory.pid, scenarios: ['baseline', 'first', 'replay'], held: [] },
    { id: 'peer-redis', label: `@node-idempotency/nestjs ${info.peer}, Redis`, base: peer.base, pid: peer.pid, scenarios: ['baseline', 'first', 'replay'], held: [] },
    { id: 'ours-peer-nest', label: `nestjs-idempotency on NestJS ${info.peerNestjs}, Redis`, base: oursNest10.base, pid: oursNest10.pid, scenarios: ['baseline', 'floor', 'first', 'replay'], held: [] },
    ...(postgres ? [{ id: 'ours-postgres', label: 'nestjs-idempotency, PostgreSQL', base: postgres.base, pid: postgres.pid, scenarios: ['baseline', 'first', 'replay'], held: [] }] : []),
  ];
  targets[0].scenarios.push('mismatch', 'mismatchLarge');
  const waitMissing = oursRedis.missing.find((line) => line.startsWith('hold-wait'));

  // Round trips and stored bytes on a Redis that holds next to nothing yet.
  const monitor = await redis.monitor();
  const trips = {
    ours: await roundTrips(monitor, oursRedis.base, { wait: !waitMissing }),
    peer: await roundTrips(monitor, peer.base, { wait: false }),
  };
  monitor.disconnect();
  const bytes = { ours: await storedBytes(redis, oursRedis.base), peer: await storedBytes(redis, peer.base) };
  console.log('\nRedis commands sent per request (MONITOR; commands run inside scripts not counted):');
  for (const [lib, paths] of Object.entries(trips)) {
    for (const [path, { total, commands }] of Object.entries(paths)) {
      console.log(`  ${lib.padEnd(5)} ${path.padEnd(24)} ${pad(total, 4)}  ${JSON.stringify(commands)}`);
    }
  }
  console.log('\nStored bytes per record (MEMORY USAGE of the keys one request created):');
  for (const [lib, sizes] of Object.entries(bytes)) {
    for (const [size, b] of Object.entries(sizes)) {
      console.log(
        `  ${lib.padEnd(5)} ${size.padEnd(7)} response ${pad(b.responseBytes, 6)} B  stored ${pad(b.storedBytes, 6)} B in ${b.keys} key(s) (payload ${b.payloadBytes} B)  ${b.ratio}x of the response${b.responseBytes > 10_000 ? `, ${(b.responseBytes / b.storedBytes).toFixed(2)}x smaller` : ''}`,
      );
    }
  }

  const { fingerprint } = require('../dist/utils/fingerprint');
  const fingerprints = fingerprintCost(fingerprint);
  console.log('\nRequest fingerprint CPU time over JSON.parse of the same body (median of 7):');
  for (const [shape, f] of Object.entries(fingerprints)) {
    console.log(`  ${shape.padEnd(14)} ${pad(f.bytes, 8)} B  parse ${pad(f.parseMs, 6)} ms  fingerprint ${pad(f.fingerprintMs, 6)} ms  ${f.ratio}x`);
  }

  const wait = {};
  for (const [store, target] of [['Redis', oursRedis], ['memory store', oursMemory]]) {
    wait[store] = waitMissing
      ? { available: false, reason: `wait mode not available (${waitMissing})` }
      : await waitLatency(target.base, store);
    const w = wait[store];
    console.log(
      w.available
        ? `\nWait mode, ${store}: ${w.replayed} waiters on ${w.keys} keys; holder's handler done -> waiter has the replay: p50 ${w.ms.p50} ms, p90 ${w.ms.p90} ms, p99 ${w.ms.p99} ms, max ${w.ms.max} ms (the holder's own response: p50 ${w.holderOwnMs.p50} ms, p99 ${w.holderOwnMs.p99} ms)${Object.keys(w.notReplayed).length ? `; not replayed: ${JSON.stringify(w.notReplayed)}` : ''}`
        : `\nWait mode, ${store}: wait mode not available: ${w.reason}`,
    );
  }

  const { runs, seconds } = await throughput(targets, redis);
  const summary = summarise(runs, targets);
  printThroughput(summary.rows, targets);
  console.log("\nOur ratio over the peer's (each against its own baseline, paired per round):");
  for (const [name, v] of Object.entries(summary.versusPeer)) {
    console.log(
      `  ${name.padEnd(14)} ours ${v.ours.toFixed(2)}  peer ${v.peer.toFixed(2)}  ours/peer ${v.oursOverPeer.median.toFixed(2)} (${v.oursOverPeer.min.toFixed(2)}-${v.oursOverPeer.max.toFixed(2)})` +
        (v.onPeerNest ? `  on the peer's NestJS: ${v.onPeerNest.median.toFixed(2)} (${v.onPeerNest.min.toFixed(2)}-${v.onPeerNest.max.toFixed(2)})` : ''),
    );
  }
  const scale = await scaleMeasures(redisUrl, oursRedis.base);
  const targetResults = targetsOf(summary, bytes.ours, wait, scale);
  console.log('\nTargets:');
  for (const t of targetResults) {
    console.log(
      `  ${t.result.padEnd(4)} ${t.target.padEnd(56)} ${t.measured === null ? 'n/a' : `${t.measured}${t.unit === 'x' ? 'x' : ` ${t.unit}`}`} (goal ${t.goal})${t.detail ? `; ${t.detail}` : ''}`,
    );
  }

  const results = {
    date: new Date().toISOString(),
    machine: {
      cpu: os.cpus()[0]?.model.trim(),
      cores: os.cpus().length,
      memoryGiB: round(os.totalmem() / 2 ** 30, 1),
      os: `${os.type()} ${os.release()}`,
      // The machine is shared: a load well above the core count means others were busy too.
      loadAverage1m: { start: round(loadBefore), end: round(os.loadavg()[0]) },
    },
    versions: info,
    config: {
      durationS: DURATION,
      warmupS: WARMUP,
      connections: CONNECTIONS,
      rounds: ROUNDS,
      waitKeys: WAIT_KEYS,
      waiters: WAITERS,
      throughputSeconds: seconds,
    },
    libraries: Object.fromEntries(targets.map((t) => [t.id, t.label])),
    throughput: summary.rows,
    versusPeer: summary.versusPeer,
    roundTrips: trips,
    storedBytes: bytes,
    waitMode: wait,
    fingerprintOverParse: fingerprints,
    scale,
    targets: targetResults,
  };
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(join(RESULTS, 'latest.json'), `${JSON.stringify(results, null, 1)}\n`);
  writeFileSync(join(RESULTS, 'latest.svg'), renderChart(results));
  console.log('\nWrote bench/results/latest.json and bench/results/latest.svg');
  redis.disconnect();
  agent.destroy();
  await postgres?.drop();
}

/** This library's app on the PostgreSQL store, on a table of its own; undefined without a server. */
async function postgresLane(app) {
  const url = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const { Pool } = require('pg');
  const pool = new Pool({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    console.error(`PostgreSQL lane left out: ${url} does not answer (${error.message})`);
    await pool.end();
    return undefined;
  }
  const table = `bench_idempotency_${process.pid}`;
  const started = await app(join(__dirname, 'app.js'), 'postgres', 'bench:', { POSTGRES_URL: url, POSTGRES_TABLE: table });
  return { ...started, drop: () => pool.query(`DROP TABLE IF EXISTS "${table}"`).finally(() => pool.end()) };
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => children.forEach((child) => child.kill('SIGKILL')));
