// npm run bench: the apps under test, Redis and the load generator (autocannon) each run as
// their own process; prints a table and writes bench/results/latest.json.
// Env: BENCH_DURATION (s, default 5), BENCH_CONNECTIONS (20), BENCH_ROUNDS (1).
const { execFile, spawn } = require('node:child_process');
const { mkdtempSync, mkdirSync, writeFileSync } = require('node:fs');
const { createServer } = require('node:net');
const { tmpdir, cpus } = require('node:os');
const { join } = require('node:path');
const Redis = require('ioredis').default;

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const children = [];
// Never leave a Redis or an app behind, even when the run dies.
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));

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
      if (match) resolve(match);
    });
    child.on('exit', (code) => reject(new Error(`${command} exited with ${code}: ${out}`)));
  });
}

function autocannon(
  url,
  { headers = {}, body = '{"amount":100}', duration = DURATION, uniqueKey = false },
) {
  const config = JSON.stringify({
    url,
    connections: CONNECTIONS,
    duration,
    headers,
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

const post = (url, key, body = { amount: 100 }, headers = {}) =>
  fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...(key && { 'Idempotency-Key': key }),
      ...headers,
    },
    body: JSON.stringify(body),
  });

async function scenario(base, name, run) {
  await run(1); // warm-up
  const samples = [];
  for (let round = 0; round < ROUNDS; round++) samples.push(await run(DURATION));
  const pick = (f) => samples.map(f).sort((a, b) => a - b)[Math.floor(samples.length / 2)];
  return {
    name,
    reqPerSec: pick((s) => s.requests.average),
    p50: pick((s) => s.latency.p50),
    p99: pick((s) => s.latency.p99),
    non2xx: pick((s) => s.non2xx),
    errors: pick((s) => s.errors),
  };
}

async function suite(base, io) {
  const suffix = io ? '-io' : '';
  const results = [];
  results.push(
    await scenario(base, 'a. baseline', (d) =>
      autocannon(`${base}/baseline${suffix}`, { duration: d }),
    ),
  );
  results.push(
    await scenario(base, 'b. first execution', (d) =>
      autocannon(`${base}/idempotent${suffix}`, { duration: d, uniqueKey: true }),
    ),
  );
  const replayKey = `replay-${Date.now()}-${io}`;
  await post(`${base}/idempotent${suffix}`, replayKey);
  results.push(
    await scenario(base, 'c. replay', (d) =>
      autocannon(`${base}/idempotent${suffix}`, {
        duration: d,
        headers: { 'Idempotency-Key': replayKey },
      }),
    ),
  );
  const holdKey = `hold-${Date.now()}-${io}`;
  const held = post(`${base}/hold`, holdKey, { amount: 100 }, { 'x-delay-ms': '600000' }).catch(
    () => {},
  );
  await new Promise((r) => setTimeout(r, 200));
  results.push(
    await scenario(base, 'd. conflict (409)', (d) =>
      autocannon(`${base}/hold`, { duration: d, headers: { 'Idempotency-Key': holdKey } }),
    ),
  );
  void held;
  const baseline = results[0].reqPerSec;
  for (const r of results) r.ratio = r.reqPerSec / baseline;
  return results;
}

async function roundTrips(redis, base) {
  const calls = async (action, n) => {
    await redis.config('RESETSTAT');
    for (let i = 0; i < n; i++) await action(i);
    const info = await redis.info('commandstats');
    const sent = [...info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce(
      (sum, m) => sum + Number(m[2]),
      0,
    );
    return sent / n;
  };
  const key = `rt-${Date.now()}`;
  await post(`${base}/idempotent`, key);
  const holdKey = `rt-hold-${Date.now()}`;
  void post(`${base}/hold`, holdKey, { amount: 100 }, { 'x-delay-ms': '600000' }).catch(() => {});
  await new Promise((r) => setTimeout(r, 200));
  return {
    'first execution': await calls(
      (i) => post(`${base}/idempotent`, `rt-first-${Date.now()}-${i}`),
      100,
    ),
    replay: await calls(() => post(`${base}/idempotent`, key), 100),
    conflict: await calls(() => post(`${base}/hold`, holdKey), 100),
    mismatch: await calls(() => post(`${base}/idempotent`, key, { amount: 1 }), 100),
  };
}

async function storedBytes(redis, base, prefix) {
  const measure = async (size) => {
    const key = `bytes-${size}-${Date.now()}`;
    const response = await post(`${base}/idempotent`, key, { amount: 100, size });
    const raw = (await response.arrayBuffer()).byteLength;
    let cursor = '0';
    let newest;
    let best = 0;
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) {
        const usage = await redis.memory('USAGE', k);
        const body = await redis.hstrlen(k, 'b');
        if (body >= raw - 50 && body <= raw + 50 && usage > best) [best, newest] = [usage, k];
      }
    } while (cursor !== '0');
    return { responseBytes: raw, storedBytes: best, ratio: best / raw, key: newest };
  };
  return { '200 B': await measure(0), '100 KB': await measure(100_000) };
}

function table(title, rows) {
  console.log(`\n${title}`);
  console.log('scenario              req/s    p50 ms  p99 ms  ratio   non-2xx');
  for (const r of rows) {
    console.log(
      `${r.name.padEnd(20)} ${r.reqPerSec.toFixed(0).padStart(7)} ${String(r.p50).padStart(8)} ${String(r.p99).padStart(7)}  ${r.ratio.toFixed(2).padStart(5)}  ${r.non2xx}`,
    );
  }
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-redis-'));
  const redisPort = await freePort();
  await start(
    'redis-server',
    [
      '--port',
      String(redisPort),
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
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const redis = new Redis(redisUrl);
  const prefix = 'bench:';
  const app = async (store) => {
    const [, port] = await start(
      process.execPath,
      [join(__dirname, 'app.js')],
      { STORE: store, REDIS_URL: redisUrl, KEY_PREFIX: prefix },
      /READY (\d+)/,
    );
    return `http://127.0.0.1:${port}`;
  };
  const [redisApp, memoryApp] = [await app('redis'), await app('memory')];
  const results = {
    machine: {
      cpus: cpus().length,
      node: process.version,
      duration: DURATION,
      connections: CONNECTIONS,
      rounds: ROUNDS,
    },
    suites: {},
  };
  for (const [store, base] of [
    ['redis', redisApp],
    ['memory', memoryApp],
  ]) {
    for (const io of [false, true]) {
      const name = `${store}, ${io ? '~5 ms I/O handler' : 'trivial handler'}`;
      results.suites[name] = await suite(base, io);
      table(name, results.suites[name]);
    }
  }
  results.roundTrips = await roundTrips(redis, redisApp);
  results.storedBytes = await storedBytes(redis, redisApp, prefix);
  console.log('\nRedis round trips per request:', results.roundTrips);
  console.log(
    'Stored bytes per record (MEMORY USAGE):',
    JSON.stringify(results.storedBytes, null, 1),
  );
  mkdirSync(join(__dirname, 'results'), { recursive: true });
  writeFileSync(join(__dirname, 'results', 'latest.json'), JSON.stringify(results, null, 2));
  redis.disconnect();
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => children.forEach((child) => child.kill('SIGKILL')));
