// The IPC side of a load generator: bench/run.js forks one per kind (HTTP, gRPC, TCP) and keeps
// it for the whole run, so no measurement pays for a process start; each message
// { id, spec } is answered with { id, result } or { id, error }.
function serve(handlers) {
  process.on('message', async ({ id, kind, spec }) => {
    try {
      process.send({ id, result: await handlers[kind](spec) });
    } catch (error) {
      process.send({ id, error: String(error?.stack ?? error) });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.stdout.write('LOADER READY\n');
}

/** Latency percentiles (ms) and outcome counts of one measurement, the shape every loader returns. */
function summary({ latencies, seconds, ok, errors }) {
  const { percentiles } = require('../lib/stats');
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    ok,
    errors,
    latency: latencies.length ? percentiles(latencies) : undefined,
  };
}

/**
 * Runs `call` from `connections` callers, each awaiting one call at a time, until `duration`
 * seconds have passed or `count` calls were made. `call` resolves or rejects; a rejection is
 * counted under its `code` or class.
 */
async function closedLoop(call, { connections, duration, count }) {
  const { performance } = require('node:perf_hooks');
  const latencies = [];
  const errors = {};
  let ok = 0;
  let sent = 0;
  const deadline = performance.now() + (duration ?? Infinity) * 1000;
  const caller = async () => {
    while (count === undefined ? performance.now() < deadline : sent < count) {
      const i = sent++;
      const started = performance.now();
      try {
        await call(i);
        ok++;
      } catch (error) {
        const name = String(error?.code ?? error?.constructor?.name ?? 'Error');
        errors[name] = (errors[name] ?? 0) + 1;
      }
      latencies.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: connections }, caller));
  return summary({ latencies, seconds: (performance.now() - started) / 1000, ok, errors });
}

module.exports = { serve, closedLoop };
