// The results section of bench/README.md, between its markers, from a run's results: the
// machine and versions, the chart, one table of every lane and scenario, and the targets.
// `node bench/report.js` rewrites it from bench/results/latest.json.
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { SCENARIOS } = require('./scenarios');
const { STORE } = require('./lanes');
const { growthTables } = require('../growth');
const { sqlListingTables } = require('../sql-listing');

const README = join(__dirname, '..', 'README.md');
const START = '<!-- bench:results:start (written by npm run bench; edits here are lost) -->';
const END = '<!-- bench:results:end -->';

const n = (value) =>
  value === undefined ? '-' : Math.round(value).toLocaleString('en-US').replace(/,/g, ' ');
const x = (s) => (s ? `${s.median.toFixed(2)}x (${s.min.toFixed(2)}-${s.max.toFixed(2)})` : '1');

function section(r) {
  const v = r.versions;
  const c = r.config;
  const lines = [];
  const out = (line = '') => lines.push(line);
  out(
    `### ${r.quick ? 'Quick run' : 'Run'} of ${r.date.slice(0, 10)} (commit ${v.commit}${v.libraryChangesUncommitted ? ' plus uncommitted library changes' : ''})`,
  );
  out();
  if (r.quick) {
    out(
      'A `--quick` run: short measurements and two rounds, to check that every lane runs. Its numbers are not for comparison.',
    );
    out();
  }
  out(
    `Machine: ${r.machine.cores} cores (${r.machine.cpu}), 1-minute load average ${r.machine.loadAverage1m.start} at the ` +
      `start and ${r.machine.loadAverage1m.end} at the end; Node ${v.node.replace(/^v/, '')}, Redis ${v.redis}, ` +
      `${v.postgres ?? 'no PostgreSQL'}, ${v.mysql ? `MariaDB/MySQL ${v.mysql}` : 'no MariaDB'}, NestJS ${v.nestjs}; peers: ` +
      `@node-idempotency/nestjs ${v.nodeIdempotency} (NestJS ${v.peerNestjs}${v.peer11Nestjs ? ` and ${v.peer11Nestjs}` : ''}), @nestarc/idempotency ${v.nestarc ?? '(not built)'}, ` +
      `Powertools idempotency ${v.powertools}. ${c.CONNECTIONS} connections (run(): 1 call in flight, or ${c.IN_FLIGHT}), ` +
      `${c.DURATION} s per measurement after ${c.WARMUP} s of warm-up, ${c.ROUNDS} rounds (coverage groups: ` +
      `${c.COVERAGE_ROUNDS}); the run took ${c.minutes} minutes.`,
  );
  out();
  out(
    "![Throughput of first executions and replays relative to each lane's plain path](results/latest.svg)",
  );
  out();
  out(
    '| lane | scenario | req/s (min-max) | ratio to plain (min-max) | p50 / p99 ms | app CPU µs/req (over plain) | store CPU µs/req | store calls/req |',
  );
  out('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const row of r.throughput) {
    const scenario =
      SCENARIOS[row.scenario].label +
      (row.handlerRuns && row.handlerRuns !== 'as expected'
        ? ` (handler ran ${row.handlerRuns})`
        : '');
    if (row.skipped) {
      out(
        `| ${row.label} | ${scenario} | not measured: ${row.skipped.replace(/\|/g, '/')} | | | | | |`,
      );
      continue;
    }
    // Lanes of the peers: no client counters there; MONITOR's count of their Redis commands.
    const monitored = r.redisCommands?.[row.lane]?.[row.scenario]?.total;
    const calls =
      row.library === 'ours' || row.library === 'floor'
        ? row.storeCalls
        : monitored === undefined
          ? '-'
          : `${monitored}†`;
    out(
      `| ${row.label} | ${scenario} | ${n(row.reqPerSec.median)} (${n(row.reqPerSec.min)}-${n(row.reqPerSec.max)}) | ` +
        `${x(row.ratio)} | ${row.p50 ?? '-'} / ${row.p99 ?? '-'} | ${row.appCpuUs ?? '-'}` +
        `${row.appCpuOverPlainUs === undefined ? '' : ` (+${row.appCpuOverPlainUs})`} | ${row.storeCpuUs ?? '-'} | ${calls} |`,
    );
  }
  out();
  out(
    "† Redis commands counted with `MONITOR` in sequential requests (the peers' clients have no counter); " +
      "this library's and the floor's lanes count what their store client sends (Redis commands, SQL statements) under load.",
  );
  const floors = (r.versus ?? []).filter((p) => p.floor);
  if (floors.length) {
    const times = (s) => (s ? `${s.median.toFixed(2)}x` : '-');
    out();
    out(
      'This library over the floor (`bench/floor`), ours / the floor, medians of the per-round ratios: wall time per ' +
        "request and app CPU net of each lane's plain scenario (`-` where the floor's net was not above zero), and in total; " +
        "the store's CPU: Redis's, or the SQL server's backends (threads) serving each app; what each app allocated on " +
        'its JS heap per request.',
    );
    out();
    out(
      '| path | scenario | wall time, net (total) | app CPU, net (total) | store CPU | app CPU µs/req, ours / floor | store CPU µs/req, ours / floor | KB allocated/req, ours / floor |',
    );
    out('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
    const kb = (bytes) => (bytes === undefined ? '-' : (bytes / 1024).toFixed(1));
    for (const p of floors) {
      const f = p.overFloor;
      out(
        `| ${p.ours.includes('-run-') ? 'run()' : 'HTTP Express'}, ${STORE[p.ours.split('-').at(-1)]} | ${SCENARIOS[p.scenario].label} | ${times(f.wall)} (${times(f.wallTotal)}) | ` +
          `${times(f.appCpu)} (${times(f.appCpuTotal)}) | ${times(f.storeCpu)} | ${p.appCpuUs.ours ?? '-'} / ${p.appCpuUs.peer ?? '-'} | ` +
          `${p.storeCpuUs.ours ?? '-'} / ${p.storeCpuUs.peer ?? '-'} | ${kb(p.allocBytes?.ours)} / ${kb(p.allocBytes?.peer)} |`,
      );
    }
  }
  if (r.growth) {
    out();
    for (const line of growthTables(r.growth)) out(line);
  }
  if (r.sqlListing) {
    out();
    for (const line of sqlListingTables(r.sqlListing)) out(line);
  }
  out();
  out('Targets:');
  out();
  for (const t of r.targets) {
    const measured =
      t.measured === null ? 'n/a' : `${t.measured}${t.unit === 'x' ? 'x' : ` ${t.unit}`}`;
    out(
      `- **${t.result}** ${t.target}: ${measured} (goal ${t.goal.replace('>=', '≥').replace('<=', '≤')})${t.detail ? `; ${t.detail}` : ''}`,
    );
  }
  return lines.join('\n');
}

function writeReadme(results) {
  const text = readFileSync(README, 'utf8');
  const start = text.indexOf(START);
  const end = text.indexOf(END);
  if (start < 0 || end < start)
    throw new Error(`bench/README.md lacks the markers ${START} ... ${END}`);
  writeFileSync(
    README,
    `${text.slice(0, start + START.length)}\n\n${section(results)}\n\n${text.slice(end)}`,
  );
}

module.exports = { writeReadme, section };
