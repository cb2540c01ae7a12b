// The load of the run() lanes, in the process under test (a job worker calls run() in process):
// callers that each await one call at a time until the duration is over, so `concurrency` calls
// are in flight. Shared by apps/runner.js (IdempotencyService.run()) and
// bench/powertools/runner.js (makeIdempotent), which each give an adapter:
//   plain(amount)                      the function alone (the plain lane)
//   keyed(key, amount, { hold, reject, fingerprint }) the function behind the library's key:
//                                      `hold` runs until the control server releases the key,
//                                      `reject` asks for a refusal rather than a wait while the
//                                      key is held, `fingerprint` checks the amount (422 lanes)
// Control routes: /prepare {scenario} -> {key}, /measure {scenario, key, concurrency, duration
// (s) | count}, /probe {scenario, key} -> what one call did.
const { performance } = require('node:perf_hooks');
const holds = require('../holds');
const { counters } = require('./common');
const { percentiles } = require('../lib/stats');

let sequence = 0;
const fresh = (prefix) => `${prefix}-${process.pid}-${++sequence}`;

/** One call of `scenario` (the i-th), as the lane's adapter makes it. */
function caller(adapter, scenario, key) {
  const base = scenario.replace(/16$/, '');
  switch (base) {
    case 'plain':
      return () => adapter.plain(100);
    case 'first':
      return () => adapter.keyed(fresh('first'), 100, {});
    case 'replay':
      return () => adapter.keyed(key, 100, {});
    case 'conflict':
      return () => adapter.keyed(key, 100, { reject: true });
    case 'mismatch':
      return () => adapter.keyed(key, 1, { fingerprint: true });
    default:
      throw new Error(`unknown run() scenario ${scenario}`);
  }
}

async function prepare(adapter, { scenario }) {
  const base = scenario.replace(/16$/, '');
  if (base === 'replay' || base === 'mismatch') {
    const key = fresh(base);
    await adapter.keyed(key, 100, { fingerprint: base === 'mismatch' });
    return { key };
  }
  if (base === 'conflict') {
    const key = fresh(base);
    adapter.keyed(key, 100, { hold: true }).catch(() => {});
    await holds.whenHeld(key);
    return { key };
  }
  return {};
}

async function measure(adapter, { scenario, key, concurrency = 1, duration, count }) {
  const call = caller(adapter, scenario, key);
  const latencies = [];
  const errors = {};
  let ok = 0;
  let sent = 0;
  const deadline = performance.now() + (duration ?? Infinity) * 1000;
  const worker = async () => {
    while (count === undefined ? performance.now() < deadline : sent < count) {
      sent++;
      const started = performance.now();
      try {
        await call();
        ok++;
      } catch (error) {
        const name = error?.constructor?.name ?? 'Error';
        errors[name] = (errors[name] ?? 0) + 1;
      }
      latencies.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    ok,
    errors,
    latency: latencies.length ? percentiles(latencies) : undefined,
  };
}

async function probe(adapter, { scenario, key }) {
  const before = counters.executions;
  try {
    const value = await caller(adapter, scenario, key)();
    return { ok: true, executions: counters.executions - before, value };
  } catch (error) {
    return {
      ok: false,
      executions: counters.executions - before,
      error: `${error?.constructor?.name}: ${error?.message}`,
    };
  }
}

/** The control routes of a run() lane. */
const runnerRoutes = (adapter) => ({
  '/prepare': (body) => prepare(adapter, body),
  '/measure': (body) => measure(adapter, body),
  '/probe': (body) => probe(adapter, body),
});

module.exports = { runnerRoutes };
