// node bench/growth.js: how the cost of a call grows, in one process (IdempotencyService.run()
// in a Nest application context, calls one at a time; app CPU from process.cpuUsage, latency
// from performance.now):
// 1. as the stored result grows, 200 B to 1 MiB of JSON (bench/payload.js orders), on each store:
//    first execution (claim, run, store the result) and replay (claim, read the result);
// 2. on the SQL stores, with a million completed records in the table: a first execution and a
//    replay before and after they are inserted, a sweep that finds nothing expired, and a sweep
//    of 100 000 expired records.
// npm run bench runs it after its groups (growthMeasures; --quick: 30 calls, 100 000 records);
// alone it writes bench/results/growth.json and prints its tables. Needs redis-server on the
// PATH (a private one), PostgreSQL and MariaDB/MySQL as npm run bench does (bench/lib/config.js),
// in tables bench_growth_records(_steps) of their own. Env (alone): GROWTH_CALLS (200 per size;
// 1 MiB: a tenth), GROWTH_RECORDS (1 000 000), GROWTH_STORES (memory,redis,postgres,mysql).
const { randomBytes } = require('node:crypto');
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { performance } = require('node:perf_hooks');
const { load, LIBRARY } = require('./apps/common');
const { POSTGRES_URL, MYSQL_URL } = require('./lib/config');
const { startRedis } = require('./lib/setup');
const { stopAll } = require('./lib/procs');
const { percentiles } = require('./lib/stats');
const { orders } = require('./payload');

load('reflect-metadata');
const { Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const lib = load(LIBRARY);

const SIZES = [200, 10_000, 100_000, 1_048_576];
const TABLE = 'bench_growth_records';

/** The store under test, its raw client (for the SQL inserts) and how to close both. */
async function makeStore(kind, redisUrl) {
  if (kind === 'memory') return { store: new lib.MemoryIdempotencyStore({ maxBytes: 2 ** 31 }) };
  if (kind === 'redis') {
    const Redis = load('ioredis').default;
    const client = new Redis(redisUrl);
    return { store: new lib.RedisIdempotencyStore(client), close: () => client.quit() };
  }
  if (kind === 'postgres') {
    const { Pool } = load('pg');
    const pool = new Pool({ connectionString: POSTGRES_URL });
    await pool.query(`DROP TABLE IF EXISTS ${TABLE}_steps, ${TABLE}`);
    const store = new lib.PostgresIdempotencyStore(pool, { table: TABLE, ensureSchema: true });
    const sql = (text) => pool.query(text);
    return { store, sql, close: () => pool.end() };
  }
  const mysql = load('mysql2/promise');
  const pool = mysql.createPool({ uri: MYSQL_URL });
  await pool.query(`DROP TABLE IF EXISTS ${TABLE}_steps, ${TABLE}`);
  const store = new lib.MysqlIdempotencyStore(pool, { table: TABLE, ensureSchema: true });
  return { store, sql: (text) => pool.query(text), close: () => pool.end() };
}

/** `count` calls of `call(i)`: app CPU µs and latency ms (p50, p99) per call. */
async function measure(count, call) {
  for (let i = 0; i < Math.min(10, count); i++) await call(`warm-${i}`);
  const latencies = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await call(i);
    latencies.push(performance.now() - started);
  }
  const cpu = process.cpuUsage(cpu0);
  const { p50, p99 } = percentiles(latencies);
  return { cpuUs: Math.round((cpu.user + cpu.system) / count), p50, p99 };
}

/** First execution and replay of run() returning `result`. */
async function firstAndReplay(service, result, count) {
  const tag = randomBytes(4).toString('hex');
  const work = () => result;
  const first = await measure(count, (i) => service.run(`first-${tag}-${i}`, work));
  await service.run(`replay-${tag}`, work);
  const replay = await measure(count, () => service.run(`replay-${tag}`, work));
  return { first, replay };
}

/** A million completed ~200 B records, inserted by the database itself. */
async function fill(kind, sql, records) {
  const started = performance.now();
  const hex = Buffer.from(JSON.stringify(orders(200))).toString('hex');
  if (kind === 'postgres')
    await sql(
      `INSERT INTO ${TABLE} (key, state, fingerprint, meta, body, completed_at, expires_at)
       SELECT 'filler-' || i, 'c', '', '{}', decode('${hex}', 'hex'), now(), now() + interval '1 day'
       FROM generate_series(1, ${records}) AS i`,
    );
  else
    await sql(
      `INSERT INTO ${TABLE} (\`key\`, state, fingerprint, meta, body, completed_at, expires_at)
       SELECT CONCAT('filler-', seq), 'c', '', '{}', X'${hex}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 DAY
       FROM seq_1_to_${records}`,
    );
  // What autovacuum (PostgreSQL) and InnoDB's persistent statistics do soon after a table
  // grows: without statistics a freshly filled table is planned as if it were empty.
  await sql(kind === 'postgres' ? `ANALYZE ${TABLE}` : `ANALYZE TABLE ${TABLE}`);
  return Math.round(performance.now() - started);
}

async function sweepMs(store) {
  const started = performance.now();
  const deleted = await store.sweep();
  return { ms: Math.round(performance.now() - started), deleted };
}

/**
 * Both measures on `stores` (a private redis-server is started when `redisUrl` is not given):
 * { sizes: { store: { bytes: { first, replay } } }, million: { store: {...} } }.
 */
async function growthMeasures({ stores, calls, records, redisUrl }) {
  redisUrl ??= stores.includes('redis') ? (await startRedis()).url : undefined;
  const results = { calls, records, sizes: {}, million: {} };
  for (const kind of stores) {
    const { store, sql, close } = await makeStore(kind, redisUrl);
    class AppModule {}
    Module({ imports: [lib.IdempotencyModule.forRoot({ store })] })(AppModule);
    const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
    const service = app.get(lib.IdempotencyService);
    results.sizes[kind] = {};
    for (const size of SIZES) {
      const count = size > 500_000 ? Math.max(5, Math.ceil(calls / 10)) : calls;
      results.sizes[kind][size] = await firstAndReplay(service, orders(size), count);
      console.error(`${kind} ${size} B: ${JSON.stringify(results.sizes[kind][size])}`);
    }
    if (sql) {
      const small = orders(200);
      const before = await firstAndReplay(service, small, calls);
      const fillMs = await fill(kind, sql, records);
      const after = await firstAndReplay(service, small, calls);
      const idleSweep = await sweepMs(store);
      const expire = `UPDATE ${TABLE} SET expires_at = ${kind === 'postgres' ? "now() - interval '1 hour'" : 'UTC_TIMESTAMP(6) - INTERVAL 1 HOUR'} WHERE`;
      await sql(
        kind === 'postgres'
          ? `${expire} key IN (SELECT key FROM ${TABLE} WHERE key LIKE 'filler-%' LIMIT 100000)`
          : `${expire} \`key\` LIKE 'filler-%' LIMIT 100000`,
      );
      const fullSweep = await sweepMs(store);
      results.million[kind] = { fillMs, before, after, idleSweep, fullSweep };
      console.error(`${kind} million: ${JSON.stringify(results.million[kind])}`);
      await sql(`DROP TABLE IF EXISTS ${TABLE}_steps, ${TABLE}`);
    }
    await app.close();
    await store.close?.();
    await close?.();
  }
  return results;
}

/** Both tables, as Markdown lines. */
function growthTables({ calls, records, sizes, million }) {
  const cell = (m) => `${m.cpuUs} µs, ${m.p50.toFixed(2)} / ${m.p99.toFixed(2)} ms`;
  const size = (bytes) =>
    bytes >= 2 ** 20 ? '1 MiB' : bytes >= 1000 ? `${bytes / 1000} KB` : `${bytes} B`;
  const lines = [
    `run() per call as its result grows (${calls} calls one at a time; 1 MiB: a tenth): app CPU, latency p50 / p99`,
    '',
    '| store | result | first execution | replay |',
    '| --- | ---: | --- | --- |',
  ];
  for (const [kind, bySize] of Object.entries(sizes))
    for (const [bytes, { first, replay }] of Object.entries(bySize))
      lines.push(`| ${kind} | ${size(Number(bytes))} | ${cell(first)} | ${cell(replay)} |`);
  if (!Object.keys(million).length) return lines;
  lines.push(
    '',
    `The SQL stores with ${records.toLocaleString('en-US').replace(/,/g, ' ')} completed records (~200 B each) in the table: run() before and after they were inserted, and the sweeper`,
    '',
    '| store | first, empty | first, full | replay, empty | replay, full | sweep, none expired | sweep of 100 000 expired |',
    '| --- | --- | --- | --- | --- | ---: | ---: |',
  );
  for (const [kind, m] of Object.entries(million))
    lines.push(
      `| ${kind} | ${cell(m.before.first)} | ${cell(m.after.first)} | ${cell(m.before.replay)} | ${cell(m.after.replay)} | ${m.idleSweep.ms} ms | ${m.fullSweep.ms} ms (${m.fullSweep.deleted} rows) |`,
    );
  return lines;
}

module.exports = { growthMeasures, growthTables };

if (require.main === module) {
  growthMeasures({
    stores: (process.env.GROWTH_STORES ?? 'memory,redis,postgres,mysql').split(','),
    calls: Number(process.env.GROWTH_CALLS ?? 200),
    records: Number(process.env.GROWTH_RECORDS ?? 1_000_000),
  })
    .then((results) => {
      console.log(growthTables(results).join('\n'));
      mkdirSync(join(__dirname, 'results'), { recursive: true });
      writeFileSync(
        join(__dirname, 'results', 'growth.json'),
        `${JSON.stringify(results, null, 2)}\n`,
      );
    })
    .catch((error) => {
      console.error(error);
      process.exitCode = 1;
    })
    .finally(stopAll);
}
