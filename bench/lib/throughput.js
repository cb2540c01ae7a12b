// The measurements of a group: each scenario of each lane is set up and probed, warmed up once,
// then measured in rounds (every measurement once per round, odd rounds in reverse order, so
// drift hits all alike). Each sample records req/s, latency, and per request: the app's CPU
// (/proc/<pid>/stat, all threads), the store's CPU (lib/store-cpu.js) and the store round trips
// the app's client sent (apps/common.js counts them).
const { DURATION, WARMUP } = require('./config');
const { control } = require('./apps');
const { cpuMicros } = require('./procs');
const { SCENARIOS, prepare, probe, load } = require('./scenarios');
const { StoreCpu } = require('./store-cpu');
const { median, round, spread } = require('./stats');

/** Sets up and probes every scenario of the group's apps; returns the measurements. */
async function setUp(apps) {
  const measurements = [];
  for (const app of apps) {
    for (const scenario of app.lane.scenarios) {
      const m = { app, lane: app.lane, scenario, samples: [] };
      try {
        m.key = await prepare(app, scenario);
        const seen = await probe(app, scenario, m.key);
        if (seen !== SCENARIOS[scenario].expect) {
          m.skipped = `expected ${SCENARIOS[scenario].expect}, got ${seen}`;
        }
      } catch (error) {
        m.skipped = error.message.split('\n')[0];
      }
      if (m.skipped) console.error(`  ${app.lane.id} ${scenario}: not measured (${m.skipped})`);
      measurements.push(m);
    }
  }
  return measurements;
}

async function measureOnce(m, storeCpu, seconds) {
  const { app } = m;
  const before = await control(app, '/stats');
  const cpu0 = cpuMicros(app.pid);
  const store0 = await storeCpu.sample(app);
  const result = await load(app, m.scenario, m.key, { seconds });
  const cpu1 = cpuMicros(app.pid);
  const store1 = await storeCpu.sample(app);
  const after = await control(app, '/stats');
  const n = result.requests || NaN;
  const storeUs = StoreCpu.delta(store0, store1);
  return {
    rps: result.rps,
    requests: result.requests,
    ok: result.ok,
    errors: result.errors,
    p50: result.latency?.p50,
    p99: result.latency?.p99,
    appCpuUs: (cpu1 - cpu0) / n,
    storeCpuUs: storeUs === undefined ? undefined : storeUs / n,
    storeCalls: (after.storeCalls - before.storeCalls) / n,
    allocBytes: (after.allocated - before.allocated) / n,
    executions: (after.executions - before.executions) / n,
  };
}

/** Warm-up, then `rounds` interleaved rounds; fills each measurement's samples. */
async function runRounds(measurements, storeCpu, rounds, onRound) {
  const live = measurements.filter((m) => !m.skipped);
  if (WARMUP > 0) for (const m of live) await measureOnce(m, storeCpu, WARMUP);
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? [...live].reverse() : live;
    for (const m of order) m.samples.push(await measureOnce(m, storeCpu, DURATION));
    onRound?.(r + 1, rounds);
  }
}

const cell = (values, digits = 1) => spread(values, digits);
/** The median of the finite values, rounded; undefined when there is none. */
const med = (values, digits = 1) => {
  const finite = values.filter(Number.isFinite);
  return finite.length ? round(median(finite), digits) : undefined;
};

/** 'as expected', or how often the handler ran where it should not have (or the reverse). */
function handlerRuns(scenario, samples) {
  const runs = SCENARIOS[scenario].expect === 'executed' ? 1 : 0;
  const worst = Math.max(...samples.map((x) => Math.abs(x.executions - runs)));
  return worst < 0.01
    ? 'as expected'
    : `${Math.max(...samples.map((x) => x.executions)).toFixed(2)} per request, expected ${runs}`;
}

/** One row per measurement: medians and min-max of its rounds, ratios to its own plain lane. */
function summarise(measurements) {
  const find = (lane, scenario) =>
    measurements.find((m) => m.lane === lane && m.scenario === scenario);
  return measurements.map((m) => {
    const row = {
      group: m.lane.group,
      lane: m.lane.id,
      label: m.lane.label,
      library: m.lane.library,
      kind: m.lane.kind,
      store: m.lane.store,
      variant: m.lane.variant,
      scenario: m.scenario,
    };
    if (m.skipped || m.samples.length === 0)
      return { ...row, skipped: m.skipped ?? 'not measured' };
    const s = m.samples;
    const plainOf = SCENARIOS[m.scenario].plain;
    const plain = plainOf && find(m.lane, plainOf);
    const paired = plain && !plain.skipped && plain.samples.length === s.length;
    const total = (key) => s.reduce((sum, x) => sum + (x[key] ?? 0), 0);
    return {
      ...row,
      rounds: s.length,
      reqPerSec: cell(
        s.map((x) => x.rps),
        0,
      ),
      p50: med(
        s.map((x) => x.p50),
        2,
      ),
      p99: med(
        s.map((x) => x.p99),
        2,
      ),
      // Paired per round: the scenario and its plain lane ran back to back.
      ratio: paired
        ? cell(
            s.map((x, i) => x.rps / plain.samples[i].rps),
            3,
          )
        : undefined,
      appCpuUs: med(s.map((x) => x.appCpuUs)),
      appCpuOverPlainUs: paired
        ? med(s.map((x, i) => x.appCpuUs - plain.samples[i].appCpuUs))
        : undefined,
      storeCpuUs: med(s.map((x) => x.storeCpuUs)),
      // Bytes the app allocated per request (bench/apps/common.js), the floor's lanes included.
      allocBytes: med(
        s.map((x) => x.allocBytes),
        0,
      ),
      storeCalls: med(
        s.map((x) => x.storeCalls),
        2,
      ),
      executionsPerRequest: med(
        s.map((x) => x.executions),
        3,
      ),
      // The probe checked one request; this checks them all: a replay whose record went away
      // (evicted, expired) would run the handler, and measure first executions instead.
      handlerRuns: handlerRuns(m.scenario, s),
      requests: total('requests'),
      ok: total('ok'),
      errors: s.reduce((all, x) => {
        for (const [k, v] of Object.entries(x.errors ?? {})) all[k] = (all[k] ?? 0) + v;
        return all;
      }, {}),
      samples: s.map((x) => ({
        rps: round(x.rps, 0),
        appCpuUs: round(x.appCpuUs, 1),
        storeCpuUs: x.storeCpuUs === undefined ? undefined : round(x.storeCpuUs, 1),
      })),
    };
  });
}

module.exports = { setUp, runRounds, summarise };
