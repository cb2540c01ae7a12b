// node bench/memory-listing.js: listing on the memory store (IdempotencyStore.list), in the
// bench's own process: the 50 half-done runs among 100 000 completed records, a page of the
// newest completed records and countRecords() (ms per call); and what remembering claims for
// listing costs a first execution (claim with `about`, complete: CPU µs per call), rounds
// interleaved with BASELINE (a build of the library without listing, e.g. main's dist/).
// npm run bench runs it after its groups (--only=memory-listing for it alone); alone it prints
// its tables and writes bench/results/memory-listing.json. Env: LISTING_RECORDS (100 000;
// --quick 20 000), LISTING_CALLS (20 000 first executions per round, 6 rounds),
// BENCH_BASELINE_LIBRARY (a dist/ folder to compare with).
const { mkdirSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { join, resolve } = require('node:path');
const { performance } = require('node:perf_hooks');
const { load, LIBRARY } = require('./apps/common');
const { median } = require('./lib/stats');

const PREFIX = 'bench-listing:';
const ABOUT = {
  route: 'POST /orders',
  label: 'a-sealed-key-and-owner-of-about-sixty-bytes-0123456789',
};
const RESPONSE = {
  meta: '{"s":201}',
  body: Buffer.from(JSON.stringify({ id: 'ord_1', total: 4200 })),
};
/** Room for every record of the run: the defaults (10 000, 32 MiB) would evict them. */
const ROOM = { maxEntries: 5_000_000, maxBytes: 4 * 2 ** 30, sweepIntervalMs: 0 };

/** Per call of `fn` (`times` calls): ms (median) and app CPU µs. */
async function perCall(times, fn) {
  const ms = [];
  let items;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < times; i++) {
    const started = performance.now();
    items = await fn();
    ms.push(performance.now() - started);
  }
  const cpu = process.cpuUsage(cpu0);
  return {
    items,
    ms: Math.round(median(ms) * 100) / 100,
    cpuUs: Math.round((cpu.user + cpu.system) / times),
  };
}

async function listingCost(records) {
  const store = new (load(LIBRARY).MemoryIdempotencyStore)(ROOM);
  for (let i = 0; i < records; i++) {
    const key = `${PREFIX}{c${i}}`;
    await store.claim(key, { token: 't', fingerprint: '', leaseMs: 60_000, about: ABOUT });
    await store.complete(key, 't', RESPONSE, 3_600_000);
  }
  for (let i = 0; i < 50; i++) {
    const key = `${PREFIX}{h${i}}`;
    const claim = { token: 't', fingerprint: 'f', leaseMs: 60_000, about: ABOUT, resumable: true };
    await store.claim(key, claim);
    await store.recordStep(key, 't', { index: 0, name: 'order', result: RESPONSE }, 3_600_000);
    await store.release(key, 't');
  }
  const list = (state) => async () =>
    (await store.list({ prefix: PREFIX, state, limit: 50 })).items.length;
  const result = {
    records,
    list: await perCall(20, list('half_done')),
    completed: await perCall(20, list('completed')),
    count: await perCall(20, async () => (await store.countRecords(PREFIX)).completed),
  };
  await store.close();
  return result;
}

/** App CPU µs per first execution (claim with about, complete) on `store`, `calls` of them. */
async function firstExecutions(store, calls, tag) {
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const key = `bench-first:{${tag}-${i}}`;
    await store.claim(key, { token: 't', fingerprint: 'fp', leaseMs: 60_000, about: ABOUT });
    await store.complete(key, 't', RESPONSE, 60_000);
  }
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / calls;
}

async function firstExecutionCost(calls, baseline) {
  const libraries = { index: LIBRARY, ...(baseline && { baseline: resolve(baseline) }) };
  const lanes = Object.entries(libraries).map(([name, dir]) => {
    const lib = createRequire(join(dir, 'index.js'))(dir);
    return { name, store: new lib.MemoryIdempotencyStore(ROOM), rounds: [] };
  });
  for (const lane of lanes) await firstExecutions(lane.store, 2_000, `warm-${lane.name}`);
  for (let round = 0; round < 6; round++) {
    for (const lane of round % 2 ? [...lanes].reverse() : lanes) {
      lane.rounds.push(await firstExecutions(lane.store, calls, `${lane.name}-${round}`));
    }
  }
  const result = { calls, rounds: 6 };
  for (const lane of lanes) {
    result[lane.name] = {
      cpuUs: Math.round(median(lane.rounds) * 100) / 100,
      spread: lane.rounds.map((us) => Math.round(us * 100) / 100),
    };
    await lane.store.close();
  }
  return result;
}

/** Both measures. */
async function measures({ records, calls, baseline }) {
  return { listing: await listingCost(records), first: await firstExecutionCost(calls, baseline) };
}

/** Both tables, as Markdown lines. */
function tables({ listing, first }) {
  const n = listing.records.toLocaleString('en-US').replace(/,/g, ' ');
  const row = (name, m) => `| ${name} | ${m.items} | ${m.ms} ms | ${m.cpuUs} µs |`;
  const lines = [
    `Memory store: the 50 half-done runs among ${n} completed records, per call`,
    '',
    '| call | items | latency (median) | app CPU |',
    '| --- | ---: | ---: | ---: |',
    row("list({ state: 'half_done', limit: 50 })", listing.list),
    row("list({ state: 'completed', limit: 50 })", listing.completed),
    row('countRecords()', listing.count),
    '',
    `Memory store: a first execution (claim with about + complete), ${first.calls} per round, ${first.rounds} rounds interleaved; median app CPU`,
    '',
    '| build | app CPU |',
    '| --- | ---: |',
    `| this build (listing) | ${first.index.cpuUs} µs |`,
  ];
  if (first.baseline) lines.push(`| baseline (no listing) | ${first.baseline.cpuUs} µs |`);
  return lines;
}

module.exports = { measures, tables };

if (require.main === module) {
  const quick = process.argv.includes('--quick');
  measures({
    records: Number(process.env.LISTING_RECORDS ?? (quick ? 20_000 : 100_000)),
    calls: Number(process.env.LISTING_CALLS ?? 20_000),
    baseline: process.env.BENCH_BASELINE_LIBRARY,
  })
    .then((results) => {
      console.log(tables(results).join('\n'));
      mkdirSync(join(__dirname, 'results'), { recursive: true });
      writeFileSync(
        join(__dirname, 'results', 'memory-listing.json'),
        `${JSON.stringify(results, null, 2)}\n`,
      );
    })
    .catch((error) => {
      console.error(error);
      process.exitCode = 1;
    });
}
