// node bench/profile.js <kind> <store> <scenario> [library]: where an app's CPU goes. Starts one
// lane's app, loads it with the scenario as npm run bench does, and profiles DURATION seconds of
// that load (V8's sampling profiler through node:inspector, started and stopped by the app's
// control server, so boot and warm-up stay out); prints the self time per request of the top
// functions and per package (NestJS, Express, RxJS, ioredis, this library's dist/, ...) and
// writes the .cpuprofile (for Chrome DevTools). E.g. `node bench/profile.js express redis
// first`, `node bench/profile.js run redis first powertools`. Env: DURATION (10 s), TOP (30),
// PROFILE_DIR (default: a new temp folder).
const { mkdtempSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { startApp, control } = require('./lib/apps');
const { closeLoaders } = require('./lib/loaders');
const { stopAll } = require('./lib/procs');
const { startRedis } = require('./lib/setup');
const { prepare, load } = require('./lib/scenarios');

const [kind = 'express', store = 'redis', scenario = 'first', library = 'ours'] =
  process.argv.slice(2);
const DURATION = Number(process.env.DURATION ?? 10);
const TOP = Number(process.env.TOP ?? 30);
/** HEAP=1: where the load allocates (V8's sampling heap profiler), not where it spends CPU. */
const HEAP = process.env.HEAP === '1';

const packageOf = (url, functionName) => {
  if (functionName === '(garbage collector)') return 'GC';
  if (/\/dist\//.test(url) && !/node_modules/.test(url)) return 'nestjs-idempotency (dist/)';
  const pkg = /.*node_modules\/(@[^/]+\/[^/]+|[^/]+)\//.exec(url);
  if (pkg) return pkg[1];
  if (/^node:|^internal\//.test(url) || url === '') return 'node (runtime, natives)';
  return url.replace(/^.*\/bench\//, 'bench/');
};

async function main() {
  const dir = process.env.PROFILE_DIR ?? mkdtempSync(join(os.tmpdir(), 'bench-prof-'));
  const redis = store === 'redis' ? await startRedis() : undefined;
  const lane = { id: `profile-${library}-${kind}-${store}`, kind, store, library, variant: [] };
  const app = await startApp(lane, {
    redisUrl: redis?.url,
    postgresUrl:
      process.env.IDEMPOTENCY_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    mysqlUrl: process.env.IDEMPOTENCY_TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test',
  });
  const key = await prepare(app, scenario);
  await load(app, scenario, key, { seconds: 3 });
  await control(app, '/profile', { action: 'start', heap: HEAP });
  const result = await load(app, scenario, key, { seconds: DURATION });
  const { profile } = await control(app, '/profile', { action: 'stop', heap: HEAP });
  const file = join(dir, `${lane.id}-${scenario}.${HEAP ? 'heapprofile' : 'cpuprofile'}`);
  writeFileSync(file, JSON.stringify(profile));
  if (HEAP) return printAllocations(lane, scenario, result.requests, profile, file);

  const self = new Map();
  profile.samples.forEach((id, i) =>
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)),
  );
  const byFunction = new Map();
  const byPackage = new Map();
  let busy = 0;
  for (const node of profile.nodes) {
    const time = self.get(node.id) ?? 0;
    const { functionName } = node.callFrame;
    if (functionName === '(idle)' || functionName === '(program)') continue;
    busy += time;
    addTo(byFunction, byPackage, node.callFrame, time);
  }
  const n = result.requests;
  console.log(
    `${lane.id} ${scenario} on Node ${process.version}: ${n} requests in ${DURATION} s; main thread busy ` +
      `${(busy / n).toFixed(1)} µs per request (idle and "program" left out); ${file}`,
  );
  const print = (title, map, limit) => {
    console.log(`\n${title}: µs of self time per request, share of the busy time`);
    for (const [name, time] of [...map].sort((a, b) => b[1] - a[1]).slice(0, limit)) {
      console.log(
        `  ${(time / n).toFixed(2).padStart(8)} ${((100 * time) / busy).toFixed(1).padStart(5)}%  ${name}`,
      );
    }
  };
  print('By package', byPackage, 20);
  print('Top functions', byFunction, TOP);
}

/** Adds `amount` to its frame's function and package. */
function addTo(byFunction, byPackage, { functionName, url, lineNumber }, amount) {
  const where = url.replace(/^.*node_modules\//, '').replace(/^.*\/(dist|bench)\//, '$1/');
  const name = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + amount);
  const pkg = packageOf(url, functionName);
  byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + amount);
}

/** The heap profile's bytes allocated per request, by package and by function (self). */
function printAllocations(lane, scenario, n, profile, file) {
  const byFunction = new Map();
  const byPackage = new Map();
  let total = 0;
  const visit = (node) => {
    const bytes = node.selfSize;
    total += bytes;
    addTo(byFunction, byPackage, node.callFrame, bytes);
    node.children.forEach(visit);
  };
  visit(profile.head);
  console.log(
    `${lane.id} ${scenario} on Node ${process.version}: ${n} requests in ${DURATION} s; ` +
      `${Math.round(total / n)} bytes allocated per request (sampled); ${file}`,
  );
  for (const [title, map, limit] of [
    ['By package', byPackage, 20],
    ['Top functions', byFunction, TOP],
  ]) {
    console.log(`\n${title}: bytes allocated per request (self), share of the total`);
    for (const [name, bytes] of [...map].sort((a, b) => b[1] - a[1]).slice(0, limit)) {
      const share = ((100 * bytes) / total).toFixed(1);
      console.log(`  ${(bytes / n).toFixed(0).padStart(8)} ${share.padStart(5)}%  ${name}`);
    }
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
