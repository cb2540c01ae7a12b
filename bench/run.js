// npm run bench: every entry point of this library (HTTP on Express and Fastify, GraphQL on
// Apollo and Mercurius, gRPC, a TCP message handler, run()) on every store, each beside the same
// entry point without idempotency, and the peers on the same paths; prints tables and the
// targets, writes bench/results/latest.json and latest.svg and the table in bench/README.md.
// `npm run bench -- --quick` checks every lane in minutes. Lanes: lib/lanes.js; knobs:
// lib/config.js; both are described in bench/README.md.
const os = require('node:os');
const { mkdirSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const Redis = require('ioredis').default;
const config = require('./lib/config');
const { GROUPS } = require('./lib/lanes');
const { startApp, stopApp, agent } = require('./lib/apps');
const { closeLoaders } = require('./lib/loaders');
const { stopAll } = require('./lib/procs');
const { preparePeers, startRedis, checkSql } = require('./lib/setup');
const { setUp, runRounds, summarise } = require('./lib/throughput');
const { StoreCpu } = require('./lib/store-cpu');
const { redisRoundTrips } = require('./lib/round-trips');
const { storedBytes } = require('./lib/stored-bytes');
const { waitLatency } = require('./lib/wait-mode');
const { versus } = require('./lib/versus');
const { targets } = require('./lib/targets');
const { printGroup, printVersus, printTargets, printExtras } = require('./lib/print');
const { versions } = require('./lib/versions');
const { writeReadme } = require('./lib/readme');
const { renderChart } = require('./chart');
const { fingerprintCost } = require('./fingerprint');
const { growthMeasures, growthTables } = require('./growth');
const { sqlListingMeasures, sqlListingTables } = require('./sql-listing');

/** Seconds a group takes, roughly: app starts, set-up, warm-up and rounds. */
function estimate(groups) {
  let seconds = 0;
  for (const g of groups) {
    const n = g.lanes.reduce((total, lane) => total + lane.scenarios.length, 0);
    const rounds = g.coverage ? config.COVERAGE_ROUNDS : config.ROUNDS;
    seconds +=
      4 + g.lanes.length * 0.5 + n * (0.3 + config.WARMUP + rounds * (config.DURATION + 0.15));
  }
  return seconds;
}

async function runGroup(group, context) {
  console.log(`\n== ${group.title} (${group.lanes.length} lanes)`);
  const apps = await Promise.all(group.lanes.map((lane) => startApp(lane, context.appEnv)));
  const extras = {};
  try {
    const measurements = await setUp(apps);
    if (apps.some((app) => app.lane.roundTrips)) {
      extras.redisCommands = await redisRoundTrips(context.redis, measurements);
    }
    for (const app of apps.filter((a) => a.lane.storedBytes)) {
      (extras.storedBytes ??= {})[app.lane.id] = await storedBytes(context.redis, app);
    }
    if (!config.QUICK || config.WAIT_KEYS > 0) {
      for (const app of apps.filter((a) => a.lane.wait)) {
        (extras.waitMode ??= {})[app.lane.id] = await waitLatency(app);
      }
    }
    const rounds = group.coverage ? config.COVERAGE_ROUNDS : config.ROUNDS;
    const started = Date.now();
    await runRounds(measurements, context.storeCpu, rounds, (r, of) =>
      process.stderr.write(`  round ${r}/${of} (${Math.round((Date.now() - started) / 1000)} s)\n`),
    );
    const rows = summarise(measurements);
    const pairs = versus(measurements);
    printGroup(group, rows);
    printVersus(pairs);
    printExtras(extras);
    return { rows, pairs, extras, seconds: Math.round((Date.now() - started) / 1000) };
  } finally {
    apps.forEach(stopApp);
  }
}

async function main() {
  const started = Date.now();
  const loadBefore = os.loadavg()[0];
  const peers = preparePeers();
  const redisServer = await startRedis();
  const redis = new Redis(redisServer.url);
  // The run may end with redis-server stopped before this client: nothing to report then.
  redis.on('error', () => {});
  let groups = GROUPS.filter((g) => !config.ONLY || config.ONLY.includes(g.name));
  const lanesOf = (store) => groups.flatMap((g) => g.lanes).filter((lane) => lane.store === store);
  const sql = {
    postgres: await checkSql('postgres', config.POSTGRES_URL, lanesOf('postgres')),
    mysql: await checkSql('mysql', config.MYSQL_URL, lanesOf('mysql')),
  };
  groups = groups
    .map((g) => ({
      ...g,
      lanes: g.lanes.filter(
        (lane) => (lane.library !== 'nestarc' || peers.nestarc) && (sql[lane.store]?.ok ?? true),
      ),
    }))
    .filter((g) => g.lanes.length);
  const laneCount = groups.reduce((n, g) => n + g.lanes.length, 0);
  console.log(
    `${config.QUICK ? 'Quick run' : 'Run'}: ${laneCount} lanes in ${groups.length} groups; ` +
      `about ${Math.round(estimate(groups) / 60)} minutes`,
  );
  const storeCpu = new StoreCpu({
    redisPid: redisServer.pid,
    postgresUrl: config.POSTGRES_URL,
    mysqlUrl: config.MYSQL_URL,
  });
  const context = {
    redis,
    storeCpu,
    appEnv: {
      redisUrl: redisServer.url,
      postgresUrl: config.POSTGRES_URL,
      mysqlUrl: config.MYSQL_URL,
    },
  };
  const results = { rows: [], versus: [], extras: {}, groups: {} };
  for (const group of groups) {
    const r = await runGroup(group, context);
    results.rows.push(...r.rows);
    results.versus.push(...r.pairs);
    for (const [name, value] of Object.entries(r.extras))
      Object.assign((results.extras[name] ??= {}), value);
    results.groups[group.name] = {
      title: group.title,
      coverage: !!group.coverage,
      seconds: r.seconds,
    };
  }
  const { fingerprint } = require('../dist/utils/fingerprint');
  results.extras.fingerprintOverParse = fingerprintCost(fingerprint, config.QUICK ? 3 : 7);
  if (!config.ONLY || config.ONLY.includes('growth')) {
    console.log('\n== How cost grows: the stored result, and SQL tables of a million records');
    const stores = ['memory', 'redis', ...['postgres', 'mysql'].filter((s) => sql[s].ok)];
    results.extras.growth = await growthMeasures({
      stores,
      redisUrl: redisServer.url,
      calls: config.QUICK ? 30 : 200,
      records: config.QUICK ? 100_000 : 1_000_000,
    });
    console.log(growthTables(results.extras.growth).join('\n'));
  }
  const listingStores = ['postgres', 'mysql'].filter((s) => sql[s].ok);
  if ((!config.ONLY || config.ONLY.includes('sql-listing')) && listingStores.length) {
    console.log('\n== SQL listing: the half-done runs among completed records, and its cost');
    results.extras.sqlListing = await sqlListingMeasures({
      stores: listingStores,
      ops: config.QUICK ? 300 : 2000,
      records: config.QUICK ? 20_000 : 100_000,
    });
    console.log(sqlListingTables(results.extras.sqlListing).join('\n'));
  }
  if (config.SCALE) {
    const { scaleMeasures } = require('./scale');
    results.extras.scale = await scaleMeasures(redisServer.url);
  }
  const output = {
    date: new Date().toISOString(),
    quick: config.QUICK,
    machine: {
      cpu: os.cpus()[0]?.model.trim(),
      cores: os.cpus().length,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      os: `${os.type()} ${os.release()}`,
      // The machine may be shared: a load well above the core count means others were busy too.
      loadAverage1m: {
        start: Math.round(loadBefore * 100) / 100,
        end: Math.round(os.loadavg()[0] * 100) / 100,
      },
    },
    versions: versions({
      redis: redisServer.version,
      postgres: sql.postgres.version,
      mysql: sql.mysql.version,
    }),
    config: { ...config, minutes: Math.round((Date.now() - started) / 600) / 100 },
    groups: results.groups,
    throughput: results.rows,
    versus: results.versus,
    ...results.extras,
  };
  output.targets = targets(output);
  printTargets(output.targets);
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(output, null, 1)}\n`);
  writeFileSync(join(dir, 'latest.svg'), renderChart(output));
  if (!config.NO_README) writeReadme(output);
  console.log(
    `\nWrote bench/results/latest.json and latest.svg${config.NO_README ? '' : ', and the table in bench/README.md'} ` +
      `(${output.config.minutes} minutes)`,
  );
  redis.disconnect();
  agent.destroy();
  await storeCpu.close();
  await dropTables(groups, sql);
}

/** The SQL lanes' tables, dropped once the run is over. */
async function dropTables(groups, sql) {
  const { checkSql: drop } = require('./lib/setup');
  const lanes = groups.flatMap((g) => g.lanes);
  for (const store of ['postgres', 'mysql']) {
    const own = lanes.filter((lane) => lane.store === store);
    if (own.length && sql[store].ok)
      await drop(store, store === 'postgres' ? config.POSTGRES_URL : config.MYSQL_URL, own);
  }
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => {
    closeLoaders();
    stopAll();
  });
