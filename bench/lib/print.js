// The console tables of a run.
const { SCENARIOS } = require('./scenarios');

const pad = (value, width) => String(value ?? '-').padStart(width);
const fix = (value, digits = 2) => (value === undefined ? '-' : value.toFixed(digits));
const range = (s, digits = 2) => (s ? `${s.min.toFixed(digits)}-${s.max.toFixed(digits)}` : '-');

function printGroup(group, rows) {
  console.log(
    `\n${group.title}: req/s and ratio to the lane's plain scenario (median, min-max of the rounds); ` +
      'CPU µs per request (app, and over plain), store CPU µs and store calls per request',
  );
  console.log(
    `${'lane'.padEnd(52)} ${'scenario'.padEnd(27)} ${pad('req/s', 7)} ${pad('ratio', 6)} ${pad('min-max', 11)} ` +
      `${pad('p99', 6)} ${pad('app µs', 7)} ${pad('+plain', 7)} ${pad('store µs', 8)} ${pad('calls', 5)}  errors`,
  );
  for (const r of rows) {
    const head = `${r.label.slice(0, 52).padEnd(52)} ${SCENARIOS[r.scenario].label.padEnd(27)}`;
    if (r.skipped) {
      console.log(`${head} not measured: ${r.skipped}`);
      continue;
    }
    const errors = Object.entries(r.errors)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    console.log(
      `${head} ${pad(Math.round(r.reqPerSec.median), 7)} ${pad(r.ratio ? fix(r.ratio.median) : '1', 6)} ` +
        `${pad(range(r.ratio), 11)} ${pad(r.p99, 6)} ${pad(r.appCpuUs, 7)} ${pad(r.appCpuOverPlainUs, 7)} ` +
        `${pad(r.storeCpuUs, 8)} ${pad(r.storeCalls, 5)}  ${errors}`,
    );
  }
}

function printVersus(all) {
  const pairs = all.filter((p) => !p.floor);
  printOverFloor(all.filter((p) => p.floor));
  if (!pairs.length) return;
  console.log(
    '\nAgainst the peers (each normalised by its own plain lane, and raw req/s, paired per round; CPU µs per request):',
  );
  for (const p of pairs) {
    console.log(
      `  ${`${p.ours} / ${p.peer}`.padEnd(62)} ${p.scenario.padEnd(14)} ${fix(p.normalised.median)}x (${range(p.normalised)}), raw ${fix(p.raw.median)}x` +
        `  app ${pad(p.appCpuUs.ours, 6)} vs ${pad(p.appCpuUs.peer, 6)}  store ${pad(fix(p.storeCpuUs.ours, 1), 6)} vs ${pad(fix(p.storeCpuUs.peer, 1), 6)}`,
    );
  }
}

const times = (s) => (s ? `${fix(s.median)}x` : '-');

function printOverFloor(pairs) {
  if (!pairs.length) return;
  console.log(
    '\nOurs / the floor (medians of per-round ratios; wall time per request and app CPU net of ' +
      "each lane's plain scenario, and in total; '-' where the floor's net was not above 0; store " +
      "CPU: Redis's, or the SQL backends' serving each app):",
  );
  for (const p of pairs) {
    const f = p.overFloor;
    console.log(
      `  ${`${p.ours} / ${p.peer}`.padEnd(48)} ${p.scenario.padEnd(9)} wall ${pad(times(f.wall), 6)} (total ${times(f.wallTotal)})` +
        `  app CPU ${pad(times(f.appCpu), 6)} (total ${times(f.appCpuTotal)})  store CPU ${pad(times(f.storeCpu), 6)}` +
        `  app µs ${pad(p.appCpuUs.ours, 6)} vs ${pad(p.appCpuUs.peer, 6)}  store µs ${pad(fix(p.storeCpuUs.ours, 1), 5)} vs ${pad(fix(p.storeCpuUs.peer, 1), 5)}` +
        `  alloc KB ${pad(kb(p.allocBytes?.ours), 5)} vs ${pad(kb(p.allocBytes?.peer), 5)}`,
    );
  }
}

const kb = (bytes) => (bytes === undefined ? '-' : (bytes / 1024).toFixed(1));

function printExtras({ redisCommands, storedBytes, waitMode }) {
  if (redisCommands) {
    console.log('\nRedis commands per request (MONITOR; commands run inside scripts not counted):');
    for (const [lane, scenarios] of Object.entries(redisCommands)) {
      for (const [scenario, { total, commands }] of Object.entries(scenarios)) {
        console.log(
          `  ${lane.padEnd(34)} ${scenario.padEnd(10)} ${pad(total, 5)}  ${JSON.stringify(commands)}`,
        );
      }
    }
  }
  for (const [lane, sizes] of Object.entries(storedBytes ?? {})) {
    for (const [size, b] of Object.entries(sizes)) {
      console.log(
        `  stored bytes ${lane.padEnd(34)} ${size.padEnd(7)} response ${pad(b.responseBytes, 7)} B, stored ${pad(b.storedBytes, 7)} B in ${b.keys} key(s), ${b.ratio}x`,
      );
    }
  }
  for (const [lane, w] of Object.entries(waitMode ?? {})) {
    console.log(
      w.available
        ? `  wait mode ${lane}: ${w.replayed} waiters on ${w.keys} keys: p50 ${w.ms.p50} ms, p99 ${w.ms.p99} ms (holder's own p99 ${w.holderOwnMs.p99} ms)`
        : `  wait mode ${lane}: not available: ${w.reason}`,
    );
  }
}

function printTargets(targets) {
  console.log('\nTargets:');
  for (const t of targets) {
    const measured =
      t.measured === null ? 'n/a' : `${t.measured}${t.unit === 'x' ? 'x' : ` ${t.unit}`}`;
    console.log(
      `  ${t.result.padEnd(4)} ${t.target.padEnd(64)} ${measured} (goal ${t.goal})${t.detail ? `; ${t.detail}` : ''}`,
    );
  }
}

module.exports = { printGroup, printVersus, printExtras, printTargets };
