// node bench/redis-listing.js: listing on Redis (IdempotencyStore.list), on a private
// redis-server, in the bench's own process:
// 1. finding the 50 half-done runs among 100 000 completed records: keys Redis read
//    (keyspace_hits + keyspace_misses), bytes it sent (total_net_output_bytes) and ms per call,
//    for list() and for a stand-in built on SCAN (what listing without an index must do); also
//    a page of the newest completed records and countRecords();
// 2. what keeping the index costs a first execution: claim (with `about`) and complete of a fresh
//    key, one at a time, rounds interleaved with the same calls on a store of this build with
//    `listing: false` (no index), and on BASELINE if set (another build, e.g. main's dist/):
//    Redis CPU per first execution (the server's /proc time, and EVALSHA's time in INFO
//    commandstats), app latency p50 and app CPU.
// npm run bench runs it after its groups (--only=redis-listing for it alone);
// alone it prints its tables and writes bench/results/redis-listing.json. Needs redis-server on
// the PATH. Env: LISTING_RECORDS (100 000; --quick 20 000), LISTING_CALLS (1 000 first
// executions per round one at a time, and ten times as many 200 at a time; 6 rounds), BENCH_BASELINE_LIBRARY (a dist/ folder to compare with).
const { mkdirSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { join, resolve } = require('node:path');
const { performance } = require('node:perf_hooks');
const { load, LIBRARY } = require('./apps/common');
const { startRedis } = require('./lib/setup');
const { cpuMicros, stopAll } = require('./lib/procs');
const { median, percentiles } = require('./lib/stats');

const Redis = load('ioredis').default;
const PREFIX = 'bench-listing:';
const ABOUT = {
  route: 'POST /orders',
  label: 'a-sealed-key-and-owner-of-about-sixty-bytes-0123456789',
};
const RESPONSE = {
  meta: '{"s":201}',
  body: Buffer.from(JSON.stringify({ id: 'ord_1', total: 4200 })),
};

/**
 * What Redis counts that a call changes: keys looked up, bytes sent, its CPU, EVALSHA's time and
 * every command's (INFO left out; commands a script runs count in both).
 */
async function redisCounters(admin, pid) {
  const [stats, commands] = await Promise.all([admin.info('stats'), admin.info('commandstats')]);
  const field = (text, pattern) => Number(pattern.exec(text)?.[1] ?? 0);
  let commandUs = 0;
  for (const [, name, usec] of commands.matchAll(/cmdstat_([\w|]+):calls=\d+,usec=(\d+)/g)) {
    if (name !== 'info' && name !== 'evalsha') commandUs += Number(usec);
  }
  return {
    keys: field(stats, /keyspace_hits:(\d+)/) + field(stats, /keyspace_misses:(\d+)/),
    bytesOut: field(stats, /total_net_output_bytes:(\d+)/),
    evalUs: field(commands, /cmdstat_evalsha:calls=\d+,usec=(\d+)/),
    commandUs,
    cpuUs: cpuMicros(pid),
  };
}

/**
 * Per call of `fn` (`times` calls; it resolves { items, scanned }: keys SCAN returned, which
 * Redis counts as no lookup): keys read, bytes Redis sent, ms (median), Redis time (EVALSHA, or
 * the commands sent, from INFO commandstats).
 */
async function perCall(admin, pid, times, fn) {
  // Two INFO replies come between the snapshots: what they send is measured and taken off.
  const idle0 = await redisCounters(admin, pid);
  const idle1 = await redisCounters(admin, pid);
  const infoBytes = idle1.bytesOut - idle0.bytesOut;
  const before = await redisCounters(admin, pid);
  const ms = [];
  let result;
  for (let i = 0; i < times; i++) {
    const started = performance.now();
    result = await fn();
    ms.push(performance.now() - started);
  }
  const after = await redisCounters(admin, pid);
  const redisUs = after.evalUs - before.evalUs || after.commandUs - before.commandUs;
  return {
    items: result.items,
    keys: Math.round((after.keys - before.keys) / times) + (result.scanned ?? 0),
    bytes: Math.round((after.bytesOut - before.bytesOut - infoBytes) / times),
    ms: Math.round(median(ms) * 10) / 10,
    redisUs: Math.round((redisUs / times) * 10) / 10,
  };
}

/**
 * The stand-in without an index: SCAN the prefix, keep the steps hashes whose record is gone,
 * read their step names; the first 50.
 */
async function scanHalfDone(client) {
  const found = [];
  let cursor = '0';
  let scanned = 0;
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
    cursor = next;
    scanned += keys.length;
    const steps = keys.filter((key) => key.endsWith(':steps'));
    if (steps.length === 0) continue;
    const pipeline = client.pipeline();
    for (const key of steps) pipeline.exists(key.slice(0, -':steps'.length)).hkeys(key);
    const replies = await pipeline.exec();
    steps.forEach((key, i) => {
      if (replies[i * 2][1] === 0) found.push({ key, steps: replies[i * 2 + 1][1] });
    });
  } while (cursor !== '0');
  return { items: found.slice(0, 50).length, scanned };
}

/** `records` completed records and 50 half-done runs (two steps, released) under PREFIX. */
async function fill(store, records) {
  const started = performance.now();
  for (let from = 0; from < records; from += 2_000) {
    const batch = Array.from({ length: Math.min(2_000, records - from) }, (_, i) => from + i);
    await Promise.all(
      batch.map(async (i) => {
        const key = `${PREFIX}{c${i}}`;
        await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000, about: ABOUT });
        await store.complete(key, 't', RESPONSE, 3_600_000);
      }),
    );
  }
  for (let i = 0; i < 50; i++) {
    const key = `${PREFIX}{h${i}}`;
    const claim = { token: 't', fingerprint: 'f', leaseMs: 60_000, about: ABOUT, resumable: true };
    await store.claim(key, claim);
    for (const [index, name] of ['order', 'charge'].entries()) {
      await store.recordStep(key, 't', { index, name, result: RESPONSE }, 3_600_000);
    }
    await store.release(key, 't');
  }
  return Math.round(performance.now() - started);
}

/** Listing the half-done runs among `records` completed ones: list() against SCAN. */
async function listingCost(redisUrl, pid, records) {
  const lib = load(LIBRARY);
  const client = new Redis(redisUrl);
  const admin = new Redis(redisUrl);
  const store = new lib.RedisIdempotencyStore(client);
  try {
    const fillMs = await fill(store, records);
    const query = { prefix: PREFIX, state: 'half_done', limit: 50 };
    const list = await perCall(admin, pid, 20, async () => ({
      items: (await store.list(query)).items.length,
    }));
    const scan = await perCall(admin, pid, 3, () => scanHalfDone(client));
    const completed = await perCall(admin, pid, 20, async () => ({
      items: (await store.list({ prefix: PREFIX, state: 'completed', limit: 50 })).items.length,
    }));
    const count = await perCall(admin, pid, 20, async () => {
      const counts = await store.countRecords(PREFIX);
      return { items: counts.half_done + counts.completed };
    });
    const memory = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))[1]);
    return { records, fillMs, list, scan, completed, count, usedMemoryMiB: memory / 2 ** 20 };
  } finally {
    client.disconnect();
    admin.disconnect();
  }
}

/** A first execution of a fresh key: claim (with about) and complete. */
async function firstExecution(store, key) {
  await store.claim(key, { token: 't', fingerprint: 'fp', leaseMs: 60_000, about: ABOUT });
  await store.complete(key, 't', RESPONSE, 60_000);
}

/**
 * One round on `store`: `calls` first executions one at a time (latency p50, app CPU), then
 * ten times as many, 200 at a time (Redis CPU: enough of them for /proc's 10 ms ticks, and
 * EVALSHA's time in INFO commandstats).
 */
async function firstExecutions(store, admin, pid, calls, tag) {
  const latencies = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await firstExecution(store, `bench-first:{${tag}-${i}}`);
    latencies.push(performance.now() - started);
  }
  const cpu = process.cpuUsage(cpu0);
  const many = calls * 10;
  const before = await redisCounters(admin, pid);
  for (let from = 0; from < many; from += 200) {
    const batch = Array.from({ length: 200 }, (_, i) => `bench-first:{${tag}-many-${from + i}}`);
    await Promise.all(batch.map((key) => firstExecution(store, key)));
  }
  const after = await redisCounters(admin, pid);
  return {
    redisCpuUs: (after.cpuUs - before.cpuUs) / many,
    evalUs: (after.evalUs - before.evalUs) / many,
    appCpuUs: (cpu.user + cpu.system) / calls,
    p50Us: percentiles(latencies).p50 * 1000,
  };
}

/** This library against `baseline` (a dist/ folder), rounds interleaved, medians per round. */
async function firstExecutionCost(redisUrl, pid, calls, baseline) {
  const libraries = { index: LIBRARY, ...(baseline && { baseline: resolve(baseline) }) };
  const admin = new Redis(redisUrl);
  const lanes = Object.entries(libraries).map(([name, dir]) => {
    const lib = createRequire(join(dir, 'index.js'))(dir);
    const client = new Redis(redisUrl);
    return { name, client, store: new lib.RedisIdempotencyStore(client), rounds: [] };
  });
  // This build with the index turned off (the store option `listing: false`).
  const client = new Redis(redisUrl);
  const store = new (load(LIBRARY).RedisIdempotencyStore)(client, { listing: false });
  lanes.push({ name: 'off', client, store, rounds: [] });
  try {
    for (const lane of lanes)
      await firstExecutions(lane.store, admin, pid, 100, `warm-${lane.name}`);
    for (let round = 0; round < 6; round++) {
      const order = round % 2 ? [...lanes].reverse() : lanes;
      for (const lane of order) {
        lane.rounds.push(
          await firstExecutions(lane.store, admin, pid, calls, `${lane.name}-${round}`),
        );
      }
    }
    const result = { calls, rounds: 6 };
    for (const lane of lanes) {
      const of = (name) => Math.round(median(lane.rounds.map((r) => r[name])) * 10) / 10;
      result[lane.name] = {
        redisCpuUs: of('redisCpuUs'),
        evalUs: of('evalUs'),
        appCpuUs: of('appCpuUs'),
        p50Us: of('p50Us'),
        spread: {
          redisCpuUs: lane.rounds.map((r) => Math.round(r.redisCpuUs * 10) / 10),
          p50Us: lane.rounds.map((r) => Math.round(r.p50Us)),
        },
      };
    }
    return result;
  } finally {
    admin.disconnect();
    for (const lane of lanes) lane.client.disconnect();
  }
}

/** Both measures, on a private redis-server. */
async function measures({ records, calls, baseline }) {
  const redis = await startRedis();
  const listing = await listingCost(redis.url, redis.pid, records);
  const first = await firstExecutionCost(redis.url, redis.pid, calls, baseline);
  return { redis: redis.version, listing, first };
}

const LANE_NAMES = {
  index: 'this build (listing index)',
  off: 'this build, `listing: false` (no index)',
  baseline: 'baseline build (BENCH_BASELINE_LIBRARY)',
};

/** Both tables, as Markdown lines. */
function tables({ listing, first }) {
  const n = listing.records.toLocaleString('en-US').replace(/,/g, ' ');
  const row = (name, m) =>
    `| ${name} | ${m.items} | ${m.keys} | ${(m.bytes / 1024).toFixed(1)} KiB | ${m.ms} ms | ${m.redisUs} µs |`;
  const lines = [
    `Redis: the 50 half-done runs among ${n} completed records (one prefix; Redis used ${listing.usedMemoryMiB.toFixed(0)} MiB), per call`,
    '',
    '| call | items | keys read | bytes Redis sent | latency (median) | Redis time |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    row("list({ state: 'half_done', limit: 50 })", listing.list),
    row('SCAN stand-in (no index)', listing.scan),
    row("list({ state: 'completed', limit: 50 })", listing.completed),
    row('countRecords()', listing.count),
  ];
  const lanes = Object.keys(first).filter((name) => first[name]?.redisCpuUs !== undefined);
  lines.push(
    '',
    `Redis: a first execution (claim with about + complete, ~60 B response); per round ${first.calls} one at a time (app CPU, latency) and ${first.calls * 10} 200 at a time (Redis CPU), ${first.rounds} rounds interleaved; medians`,
    '',
    '| build | Redis CPU | EVALSHA time (commandstats) | app CPU | latency p50 |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...lanes.map(
      (name) =>
        `| ${LANE_NAMES[name]} | ${first[name].redisCpuUs} µs | ${first[name].evalUs} µs | ${first[name].appCpuUs} µs | ${first[name].p50Us} µs |`,
    ),
  );
  return lines;
}

module.exports = { measures, tables };

if (require.main === module) {
  const quick = process.argv.includes('--quick');
  measures({
    records: Number(process.env.LISTING_RECORDS ?? (quick ? 20_000 : 100_000)),
    calls: Number(process.env.LISTING_CALLS ?? 1_000),
    baseline: process.env.BENCH_BASELINE_LIBRARY,
  })
    .then((results) => {
      console.log(tables(results).join('\n'));
      mkdirSync(join(__dirname, 'results'), { recursive: true });
      writeFileSync(
        join(__dirname, 'results', 'redis-listing.json'),
        `${JSON.stringify(results, null, 2)}\n`,
      );
    })
    .catch((error) => {
      console.error(error);
      process.exitCode = 1;
    })
    .finally(stopAll);
}
