// Scale measures of `npm run bench`: (1) the app as four processes (bench/cluster.js) on one
// Redis: baseline, first execution and replay, each against the cluster's own baseline, in
// interleaved rounds; (2) the cost of a record with BENCH_RECORDS (1 million) completed ~200 B
// records stored, on a private redis-server: Redis memory per record (INFO used_memory), and the
// p99 latency of a claim before and after they are stored. Knobs: BENCH_RECORDS, BENCH_ROUNDS,
// BENCH_DURATION (as in run.js).
const { execFile, spawn } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const { mkdtempSync } = require('node:fs');
const { createServer } = require('node:net');
const os = require('node:os');
const { join } = require('node:path');
const { performance } = require('node:perf_hooks');
const Redis = require('ioredis').default;

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const RECORDS = env('BENCH_RECORDS', 1_000_000);
const ROUNDS = env('BENCH_ROUNDS', 5);
const DURATION = env('BENCH_DURATION', 2);
const CONNECTIONS = env('BENCH_CONNECTIONS', 20);
const PROBES = 20_000;

const children = [];
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

function start(command, args, extraEnv, ready) {
  const child = spawn(command, args, {
    env: { ...process.env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = ready.exec(out);
      if (match) resolve({ match, child });
    });
    child.on('exit', (code) => reject(new Error(`${command} exited with ${code}: ${out}`)));
  });
}

function autocannon(url, { key, uniqueKey = false, duration }) {
  const config = JSON.stringify({
    url,
    connections: CONNECTIONS,
    duration,
    headers: key ? { 'idempotency-key': key } : {},
    body: '{"amount":100}',
    uniqueKey,
  });
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [join(__dirname, 'load', 'http.js'), config],
      { maxBuffer: 64 << 20 },
      (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout))),
    ),
  );
}

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** Ratios to the cluster's own baseline, medians of interleaved rounds. */
async function clusterRatios(redisUrl) {
  const { match, child } = await start(
    process.execPath,
    [join(__dirname, 'cluster.js')],
    { STORE: 'redis', REDIS_URL: redisUrl, KEY_PREFIX: 'bench-cluster:', PORT: '0', WORKERS: '4' },
    /CLUSTER READY (\d+)/,
  );
  const base = `http://127.0.0.1:${match[1]}`;
  const key = `cluster-replay-${Date.now()}`;
  await autocannon(`${base}/idempotent`, { key, duration: 1 });
  const runs = {
    baseline: (duration) => autocannon(`${base}/baseline`, { duration }),
    first: (duration) => autocannon(`${base}/idempotent`, { uniqueKey: true, duration }),
    replay: (duration) => autocannon(`${base}/idempotent`, { key, duration }),
  };
  const rps = { baseline: [], first: [], replay: [] };
  for (const run of Object.values(runs)) await run(1);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? Object.keys(runs).reverse() : Object.keys(runs);
    for (const name of order) rps[name].push((await runs[name](DURATION)).requests.average);
  }
  child.kill('SIGTERM');
  const ratio = (name) => round(median(rps[name].map((v, i) => v / rps.baseline[i])));
  return {
    processes: 4,
    reqPerSec: Object.fromEntries(Object.entries(rps).map(([k, v]) => [k, Math.round(median(v))])),
    ratios: { first: ratio('first'), replay: ratio('replay') },
  };
}

/** Latencies of `n` claims of new keys, 20 at a time, in ms. */
async function claimLatencies(store, prefix, n) {
  const latencies = [];
  let sent = 0;
  const caller = async () => {
    while (sent++ < n) {
      const started = performance.now();
      await store.claim(`${prefix}{${randomUUID()}}`, {
        token: 't',
        fingerprint: 'fp',
        leaseMs: 60_000,
      });
      latencies.push(performance.now() - started);
    }
  };
  await Promise.all(Array.from({ length: 20 }, caller));
  latencies.sort((a, b) => a - b);
  return round(latencies[Math.ceil(latencies.length * 0.99) - 1], 3);
}

/** Redis memory per completed ~200 B record, and the claim p99 empty and with RECORDS stored. */
async function recordsCost() {
  const { RedisIdempotencyStore } = require('../dist');
  const { payment } = require('./payload');
  const port = await freePort();
  const dir = mkdtempSync(join(os.tmpdir(), 'bench-records-'));
  await start(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    {},
    /Ready to accept connections/,
  );
  const client = new Redis(`redis://127.0.0.1:${port}`, { enableAutoPipelining: true });
  const store = new RedisIdempotencyStore(client);
  const body = Buffer.from(JSON.stringify(payment(100)));
  const meta = '{"s":201,"k":"j"}';
  const used = async () => Number(/used_memory:(\d+)/.exec(await client.info('memory'))[1]);
  await claimLatencies(store, 'warm-up:', PROBES); // JIT and connection warm, as in the full case
  const p99Empty = await claimLatencies(store, 'probe-empty:', PROBES);
  const before = await used();
  // What a request stores: a claim, then its completion (a 24 h TTL), under a real key's shape.
  let written = 0;
  const writer = async () => {
    while (written < RECORDS) {
      const key = `idempotency:{${randomUUID().slice(0, 22)}}`;
      written++;
      await store.claim(key, { token: 't', fingerprint: 'f'.repeat(22), leaseMs: 60_000 });
      await store.complete(key, 't', { meta, body }, 86_400_000);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: 200 }, writer));
  const fillSeconds = round((performance.now() - started) / 1000, 1);
  const after = await used();
  const p99Full = await claimLatencies(store, 'probe-full:', PROBES);
  client.disconnect();
  return {
    records: RECORDS,
    responseBytes: body.length,
    bytesPerRecord: Math.round((after - before) / RECORDS),
    p99Empty,
    p99Full,
    fillSeconds,
  };
}

exports.scaleMeasures = async (redisUrl) => {
  // 4 processes on the private Redis of the run; a million records on a second one.
  const cluster = await clusterRatios(redisUrl);
  console.log(`\nFour app processes (cluster) on one Redis: ${JSON.stringify(cluster)}`);
  const records = await recordsCost();
  console.log(`Records: ${JSON.stringify(records)}`);
  children.forEach((child) => child.kill('SIGKILL'));
  return { cluster, records };
};
