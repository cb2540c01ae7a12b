// node bench/sql-listing.js: listing on the SQL stores (PostgreSQL, MariaDB/MySQL), in the bench's
// own process, on the stores themselves:
// 1. what listing costs a first execution: claim + complete (with `about`, as the module sends
//    it), one at a time, on a table migrated with 003 and on one without 003's indexes, in
//    alternating rounds;
// 2. listing the 50 half-done runs (made the honest way: claim, two steps, release) among
//    100 000 completed records: list() time, and the statement's plan from EXPLAIN ANALYZE
//    (PostgreSQL) or ANALYZE FORMAT=JSON (MariaDB): the indexes used and the rows read, beside
//    the same statement forced to a sequential scan; and countRecords().
// npm run bench runs it after growth (sqlListingMeasures; --quick: 300 operations, 20 000
// records); alone it writes bench/results/sql-listing.json and prints its table. Tables
// bench_sql_listing_records and bench_sql_listing_bare_records (with their _steps tables) are
// its own. Env (alone): SQL_LISTING_OPS (2000), SQL_LISTING_RECORDS (100 000),
// SQL_LISTING_STORES (postgres,mysql).
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { performance } = require('node:perf_hooks');
const { load, LIBRARY } = require('./apps/common');
const { POSTGRES_URL, MYSQL_URL } = require('./lib/config');
const { percentiles } = require('./lib/stats');

const lib = load(LIBRARY);
const { listSql } = load(join(LIBRARY, 'stores', 'sql', 'sql-listing-sql.js'));

const TABLE = 'bench_sql_listing_records';
const BARE = 'bench_sql_listing_bare_records';
const PREFIX = 'bench:';
const HALF_DONE = 50;
const about = { route: 'POST /orders', label: 'the client key and owner, sealed' };
const response = { meta: '{"status":201}', body: Buffer.from('{"id":"order-1"}') };

/** Each database: its pool, stores, raw SQL and its plan reader. */
const DATABASES = {
  postgres: {
    name: 'PostgreSQL',
    async open() {
      const { Pool } = load('pg');
      const pool = new Pool({ connectionString: POSTGRES_URL });
      const sql = async (text, values) => (await pool.query(text, values)).rows;
      return {
        pool,
        sql,
        store: (table) => new lib.PostgresIdempotencyStore(pool, options(table)),
      };
    },
    dropIndexes: (sql) => sql(`DROP INDEX ${BARE}_completed_at_idx, ${BARE}_claimed_at_idx`),
    fill: (sql, records) =>
      sql(
        `INSERT INTO ${TABLE} (key, state, fingerprint, meta, body, route, label, claimed_at,
           completed_at, expires_at)
         SELECT '${PREFIX}{filler-' || i || '}', 'c', 'fp', '{"status":201}', '\\x7b7d', $1, $2,
           now() - i * interval '1 ms', now() - i * interval '1 ms', now() + interval '1 day'
         FROM generate_series(1, ${records}) AS i`,
        [about.route, about.label],
      ),
    analyze: (sql) => sql(`ANALYZE ${TABLE}`),
    listing: () => load(join(LIBRARY, 'stores', 'postgres', 'postgres-listing.js')).postgresListing,
    async plan({ pool }, { text, values }, scan) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        if (scan) {
          for (const kind of ['indexscan', 'bitmapscan', 'indexonlyscan'])
            await client.query(`SET LOCAL enable_${kind} = off`);
        }
        const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
        await client.query('ROLLBACK');
        const [{ Plan, 'Execution Time': ms }] = rows[0]['QUERY PLAN'];
        const read = { rows: 0, scans: [] };
        (function walk(node) {
          if (node['Relation Name']) {
            const loops = node['Actual Loops'] ?? 1;
            read.rows += (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * loops;
            read.scans.push(
              `${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''} on ${node['Relation Name']}`,
            );
          }
          for (const child of node.Plans ?? []) walk(child);
        })(Plan);
        return { ms: Math.round(ms * 100) / 100, rowsRead: read.rows, scans: read.scans };
      } finally {
        client.release();
      }
    },
  },
  mysql: {
    name: 'MariaDB',
    async open() {
      const mysql = load('mysql2/promise');
      const pool = mysql.createPool({ uri: MYSQL_URL });
      const sql = async (text, values) => (await pool.query(text, values))[0];
      return { pool, sql, store: (table) => new lib.MysqlIdempotencyStore(pool, options(table)) };
    },
    dropIndexes: (sql) => sql(`ALTER TABLE ${BARE} DROP KEY state_completed_at_idx`),
    fill: (sql, records) =>
      sql(
        `INSERT INTO ${TABLE} (\`key\`, state, fingerprint, meta, body, route, label, claimed_at,
           completed_at, expires_at)
         SELECT CONCAT('${PREFIX}{filler-', seq, '}'), 'c', 'fp', '{"status":201}', X'7b7d', ?, ?,
           UTC_TIMESTAMP(6) - INTERVAL seq MICROSECOND, UTC_TIMESTAMP(6) - INTERVAL seq MICROSECOND,
           UTC_TIMESTAMP(6) + INTERVAL 1 DAY
         FROM seq_1_to_${records}`,
        [about.route, about.label],
      ),
    analyze: (sql) => sql(`ANALYZE TABLE ${TABLE}`),
    listing: () => load(join(LIBRARY, 'stores', 'mysql', 'mysql-listing.js')).mysqlListing,
    async plan({ sql }, { text, values }, scan) {
      // A full scan: the statement with the table's indexes ignored.
      const from = `FROM \`${TABLE}\` r`;
      const forced = scan
        ? text.replace(
            from,
            `${from} IGNORE INDEX (PRIMARY, state_completed_at_idx, expires_at_idx)`,
          )
        : text;
      const [row] = await sql(`ANALYZE FORMAT=JSON ${forced}`, values);
      const analysis = JSON.parse(Object.values(row)[0]);
      const read = { rows: 0, scans: [] };
      (function walk(node) {
        if (node && typeof node === 'object') {
          if (node.table_name && node.access_type) {
            read.rows += Math.round((node.r_rows ?? 0) * (node.r_loops ?? 1));
            read.scans.push(
              `${node.access_type}${node.key ? ` ${node.key}` : ''} on ${node.table_name}`,
            );
          }
          for (const value of Object.values(node)) walk(value);
        }
      })(analysis);
      const ms = analysis.query_block?.r_total_time_ms ?? NaN;
      return { ms: Math.round(ms * 100) / 100, rowsRead: read.rows, scans: read.scans };
    },
  },
};

const options = (table) => ({ table, ensureSchema: true, sweepIntervalMs: 0 });

/** `fn` `count` times, one at a time: latency µs (p50, mean). */
async function timed(count, fn) {
  const latencies = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await fn(i);
    latencies.push((performance.now() - started) * 1000);
  }
  return summary(latencies);
}

function summary(latencies) {
  const { p50 } = percentiles(latencies);
  const mean = latencies.reduce((a, b) => a + b, 0) / latencies.length;
  return { p50: Math.round(p50), mean: Math.round(mean) };
}

/** A claim and its completion, as a first execution sends them. */
async function firstExecution(store, key) {
  await store.claim(key, { token: key, fingerprint: 'fp', leaseMs: 30_000, about });
  await store.complete(key, key, response, 60_000);
}

/**
 * First executions on the indexed and the bare table, one after the other in turn (which goes
 * first alternates too), so that drift (the disk's fsync, other work on the machine) hits both
 * alike.
 */
async function firstExecutions(indexed, bare, ops) {
  const latencies = { indexed: [], bare: [] };
  const stores = { indexed, bare };
  for (let i = 0; i < ops; i++) {
    for (const side of i % 2 ? ['bare', 'indexed'] : ['indexed', 'bare']) {
      const started = performance.now();
      await firstExecution(stores[side], `first:{${side}-${i}}`);
      latencies[side].push((performance.now() - started) * 1000);
    }
  }
  const [a, b] = [summary(latencies.indexed), summary(latencies.bare)];
  return { ops, indexedP50: a.p50, bareP50: b.p50, indexedMean: a.mean, bareMean: b.mean };
}

/** The half-done runs: a claim, two steps, a release (its third step failed). */
async function halfDone(store) {
  for (let i = 0; i < HALF_DONE; i++) {
    const key = `${PREFIX}{half-${i}}`;
    await store.claim(key, {
      token: 'run',
      fingerprint: 'fp',
      leaseMs: 30_000,
      resumable: true,
      about,
    });
    for (const [index, name] of ['order', 'charge'].entries())
      await store.recordStep(key, 'run', { index, name, result: response }, 3_600_000);
    await store.release(key, 'run');
  }
}

async function measureStore(kind, { ops, records }) {
  const db = DATABASES[kind];
  const conn = await db.open();
  const drop = () =>
    conn.sql(`DROP TABLE IF EXISTS ${TABLE}_steps, ${TABLE}, ${BARE}_steps, ${BARE}`);
  await drop();
  const [store, bare] = [conn.store(TABLE), conn.store(BARE)];
  try {
    await Promise.all([store.whenReady(10_000), bare.whenReady(10_000)]);
    await db.dropIndexes(conn.sql);
    const first = await firstExecutions(store, bare, ops);
    await conn.sql(`DELETE FROM ${TABLE}`);
    let started = performance.now();
    await db.fill(conn.sql, records);
    await halfDone(store);
    await db.analyze(conn.sql);
    const fillMs = Math.round(performance.now() - started);
    const query = { prefix: PREFIX, state: 'half_done', limit: HALF_DONE };
    const page = await store.list(query);
    if (page.items.length !== HALF_DONE) throw new Error(`${kind}: listed ${page.items.length}`);
    const list = await timed(20, () => store.list(query));
    const plan = { stepsTable: `${TABLE}_steps`, ...query };
    const statement = listSql(db.listing(), TABLE, plan);
    const values = statement.bind();
    const index = await db.plan(conn, { text: statement.text, values }, false);
    const scan = await db.plan(conn, { text: statement.text, values }, true);
    const count = await timed(5, () => store.countRecords(PREFIX));
    return {
      name: db.name,
      records,
      halfDone: HALF_DONE,
      fillMs,
      first,
      listUs: list,
      index,
      scan,
      countUs: count,
    };
  } finally {
    await store.close();
    await bare.close();
    await drop();
    await conn.pool.end();
  }
}

/** Every store of `stores`: { postgres: {...}, mysql: {...} }. */
async function sqlListingMeasures({ stores, ops, records }) {
  const results = {};
  for (const kind of stores) {
    results[kind] = await measureStore(kind, { ops, records });
    console.error(`${kind} listing: ${JSON.stringify(results[kind])}`);
  }
  return results;
}

/** The table, as Markdown lines. */
function sqlListingTables(results) {
  const entries = Object.values(results);
  if (!entries.length) return [];
  const n = (x) => x.toLocaleString('en-US').replace(/,/g, ' ');
  const { records, halfDone: half } = entries[0];
  const lines = [
    `The SQL stores' listing: the ${half} half-done runs among ${n(records)} completed records (list(), median of 20; its statement's plan, index and forced sequential scan), countRecords(), and a first execution (claim + complete, one at a time) with and without migration 003's indexes`,
    '',
    '| store | list() | statement: index | rows read | statement: sequential scan | rows read | countRecords() | claim + complete p50, with / without the indexes |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of entries)
    lines.push(
      `| ${r.name} | ${(r.listUs.p50 / 1000).toFixed(2)} ms | ${r.index.ms} ms (${r.index.scans.join('; ')}) | ${n(r.index.rowsRead)} | ${r.scan.ms} ms | ${n(r.scan.rowsRead)} | ${(r.countUs.p50 / 1000).toFixed(1)} ms | ${r.first.indexedP50} / ${r.first.bareP50} µs (${r.first.ops} ops) |`,
    );
  return lines;
}

module.exports = { sqlListingMeasures, sqlListingTables };

if (require.main === module) {
  sqlListingMeasures({
    stores: (process.env.SQL_LISTING_STORES ?? 'postgres,mysql').split(','),
    ops: Number(process.env.SQL_LISTING_OPS ?? 2000),
    records: Number(process.env.SQL_LISTING_RECORDS ?? 100_000),
  })
    .then((results) => {
      console.log(sqlListingTables(results).join('\n'));
      mkdirSync(join(__dirname, 'results'), { recursive: true });
      writeFileSync(
        join(__dirname, 'results', 'sql-listing.json'),
        `${JSON.stringify(results, null, 2)}\n`,
      );
    })
    .catch((error) => {
      console.error(error);
      process.exitCode = 1;
    });
}
