// Prints bench/README.md's results section as Markdown from bench/results/latest.json, so the
// published numbers are the committed run's: `node bench/report.js > section.md`.
const { readFileSync } = require('node:fs');
const { join } = require('node:path');

const r = JSON.parse(readFileSync(join(__dirname, 'results', 'latest.json'), 'utf8'));
const v = r.versions;
const c = r.config;
const n = (value) => Math.round(value).toLocaleString('en-US').replace(/,/g, ' ');
const x = (value) => `${value.toFixed(2)}x`;
const LABELS = {
  baseline: 'a. baseline',
  floor: "a'. no-op interceptor",
  first: 'b. first execution',
  replay: 'c. replay',
  conflict: 'd. conflict (409)',
  mismatch: 'e. key reused (422)',
  mismatchLarge: "e'. 422 vs 900 KB",
};
const HANDLERS = { trivial: 'trivial', io: '~5 ms I/O' };
const lines = [];
const out = (line = '') => lines.push(line);

// A stable anchor: the heading's own changes with every run.
out('<a id="results"></a>\n');
out(`## Results: the run of ${r.date.slice(0, 10)} (commit ${v.commit})`);
out();
out(
  `\`npm run bench\` starts a private redis-server, the apps under test (Express; this library on ` +
    `Redis and on the memory store, and [@node-idempotency/nestjs](https://www.npmjs.com/package/@node-idempotency/nestjs) ` +
    `${v.peer} with its Redis adapter on its own NestJS ${v.peerNestjs}) and autocannon as separate processes. ` +
    `${c.connections} connections, a ${c.warmupS} s warm-up per scenario, then ${c.rounds} rounds of ${c.durationS} s ` +
    `in which every scenario runs once (interleaved, odd rounds reversed); each library is measured against ` +
    `its own route without idempotency in the same round. Medians, with the min-max of the rounds.`,
);
out();
out(
  `Machine: ${r.machine.cores} shared cores (${r.machine.cpu}), Node ${v.node.replace(/^v/, '')}, Redis ${v.redis}, ` +
    `NestJS ${v.nestjs} (peer: ${v.peerNestjs}), autocannon ${v.autocannon}; run of ${r.date.slice(0, 10)} ` +
    `(commit ${v.commit}${v.libraryChangesUncommitted ? ' plus uncommitted library changes' : ''}; ` +
    `1-minute load average ${r.machine.loadAverage1m?.start ?? '?'} at the start, ${r.machine.loadAverage1m?.end ?? '?'} at the end).`,
);
out();
out('![Throughput relative to each library\'s own baseline](results/latest.svg)');
out();
out('| handler | library, store | scenario | req/s (min-max) | p50 / p99 ms | ratio to baseline (min-max) | CPU µs / request: app, Redis |');
out('| --- | --- | --- | ---: | ---: | ---: | ---: |');
for (const row of r.throughput) {
  out(
    `| ${HANDLERS[row.handler]} | ${r.libraries[row.target]} | ${LABELS[row.scenario]} | ` +
      `${n(row.reqPerSec.median)} (${n(row.reqPerSec.min)}-${n(row.reqPerSec.max)}) | ${row.p50} / ${row.p99} | ` +
      `${row.scenario === 'baseline' ? '1' : `${x(row.ratio.median)} (${row.ratio.min.toFixed(2)}-${row.ratio.max.toFixed(2)})`} | ` +
      `${row.appCpuUs ?? '-'}, ${row.redisCpuUs ?? '-'} |`,
  );
}
out();
out("Our ratio over the peer's (paired per round):");
out();
out(`| handler | scenario | ours | peer | ours / peer (min-max) | ours on NestJS ${v.peerNestjs} / peer (min-max) |`);
out('| --- | --- | ---: | ---: | ---: | ---: |');
const spreadOf = (s) => (s ? `${x(s.median)} (${s.min.toFixed(2)}-${s.max.toFixed(2)})` : '-');
for (const [name, vs] of Object.entries(r.versusPeer)) {
  const [handler, scenario] = name.split('/');
  out(
    `| ${HANDLERS[handler]} | ${LABELS[scenario].slice(3)} | ${x(vs.ours)} | ${x(vs.peer)} | ` +
      `${spreadOf(vs.oursOverPeer)} | ${spreadOf(vs.onPeerNest)} |`,
  );
}
out();
out('Redis commands per request (`MONITOR`, client commands only; a script counts once):');
out();
out('| path | nestjs-idempotency | @node-idempotency/nestjs |');
out('| --- | --- | --- |');
const paths = [...new Set([...Object.keys(r.roundTrips.ours), ...Object.keys(r.roundTrips.peer)])];
const cmds = (t) => (t ? `${t.total} (${Object.entries(t.commands).map(([k, s]) => `${k} ${s}`).join(', ')})` : '-');
for (const path of paths) out(`| ${path} | ${cmds(r.roundTrips.ours[path])} | ${cmds(r.roundTrips.peer[path])} |`);
out();
out('Stored bytes per record (`MEMORY USAGE`; payload = key name and values alone):');
out();
out('| response | nestjs-idempotency | @node-idempotency/nestjs |');
out('| --- | --- | --- |');
for (const size of Object.keys(r.storedBytes.ours)) {
  const cell = (b) =>
    `${n(b.storedBytes)} B = ${x(b.ratio)} (payload ${n(b.payloadBytes)} B)`;
  out(`| ${size} JSON (${n(r.storedBytes.ours[size].responseBytes)} B) | ${cell(r.storedBytes.ours[size])} | ${cell(r.storedBytes.peer[size])} |`);
}
out();
out(
  `Wait mode (\`onConflict: 'wait'\`): ${c.waiters} duplicates wait on each of ${c.waitKeys} keys; delay from the ` +
    `holder's handler completing to each waiter having the replayed response:`,
);
out();
for (const [store, w] of Object.entries(r.waitMode)) {
  out(
    w.available
      ? `- ${store}: p50 ${w.ms.p50} ms, p90 ${w.ms.p90} ms, p99 ${w.ms.p99} ms, max ${w.ms.max} ms over ${n(w.replayed)} waiters ` +
          `(the holder's own response: p50 ${w.holderOwnMs.p50} ms, p99 ${w.holderOwnMs.p99} ms)`
      : `- ${store}: not available (${w.reason})`,
  );
}
if (r.scale) {
  const { cluster, records } = r.scale;
  out();
  out(
    `Four app processes (\`bench/cluster.js\`, Node's cluster module) on one Redis, each lane against ` +
      `their own baseline: first execution ${x(cluster.ratios.first)}, replay ${x(cluster.ratios.replay)} ` +
      `(req/s: baseline ${n(cluster.reqPerSec.baseline)}, first ${n(cluster.reqPerSec.first)}, replay ${n(cluster.reqPerSec.replay)}).`,
  );
  out();
  out(
    `A million records: ${n(records.records)} completed records of a ${records.responseBytes} B response cost ` +
      `${records.bytesPerRecord} B of Redis memory each (\`used_memory\`); a claim's p99 was ${records.p99Empty} ms ` +
      `before they were stored and ${records.p99Full} ms after (20 000 claims, 20 at a time).`,
  );
}
out();
out('Targets:');
out();
out('| target | goal | measured | |');
out('| --- | --- | ---: | --- |');
for (const t of r.targets) {
  out(
    `| ${t.target} | ${t.goal.replace('>=', '≥').replace('<=', '≤')} | ${t.measured === null ? 'n/a' : t.unit === 'x' ? x(t.measured) : `${t.measured} ${t.unit}`}${t.detail ? ` (${t.detail})` : ''} | ${t.result} |`,
  );
}
out();
out(
  'Run it with `npm run bench` (about 13 minutes; the knobs are above). It writes ' +
    '`bench/results/latest.json` and the chart above.',
);
process.stdout.write(`${lines.join('\n')}\n`);
