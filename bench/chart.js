// The README's chart as a self-contained SVG, from bench/results/latest.json (plain JS, no
// dependencies): grouped bars of req/s relative to each library's own baseline, per handler,
// scenario and library, with the min-max of the rounds, a 1.0 line and the targets.
// `node bench/chart.js` redraws bench/results/latest.svg from latest.json.
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const COLORS = {
  'ours-redis': '#2563eb',
  'ours-memory': '#93c5fd',
  'peer-redis': '#c2410c',
  'ours-peer-nest': '#1e3a8a',
};
const NAMES = {
  'ours-redis': 'nestjs-idempotency, Redis',
  'ours-memory': 'nestjs-idempotency, memory store',
  'peer-redis': '@node-idempotency/nestjs, Redis',
  'ours-peer-nest': 'nestjs-idempotency on NestJS 10, Redis',
};
const PANELS = [
  ['trivial', 'Trivial handler'],
  ['io', 'Handler with ~5 ms of I/O'],
];
const GROUPS = [
  ['first', 'first execution', 0.85],
  ['replay', 'replay', 0.95],
];

const escape = (text) =>
  String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

function renderChart(results) {
  const width = 900;
  const height = 500;
  const top = 124;
  const bottom = 415;
  const panelWidth = 380;
  const panelLeft = [70, 500];
  const rows = results.throughput;
  const ids = Object.keys(COLORS).filter((id) => rows.some((r) => r.target === id));
  // Scaled to the medians: a whisker from one burst of noise must not flatten every bar.
  const medians = rows.filter((r) => r.scenario !== 'baseline').map((r) => r.ratio.median);
  const wanted = Math.max(1.5, Math.max(...medians) * 1.2);
  const step = wanted <= 2.5 ? 0.25 : 0.5;
  const yMax = Math.ceil(wanted / step) * step;
  const y = (v) => bottom - (Math.min(v, yMax) / yMax) * (bottom - top);
  const out = [];
  const text = (x, yy, content, attrs = '') =>
    out.push(`<text x="${x.toFixed(1)}" y="${yy.toFixed(1)}" ${attrs}>${escape(content)}</text>`);
  const line = (x1, y1, x2, y2, attrs) =>
    out.push(
      `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" ${attrs}/>`,
    );

  const v = results.versions;
  text(20, 26, 'Throughput relative to the same route without idempotency (req/s ratio, higher is better)', 'class="title"');
  text(
    20,
    46,
    `Median of ${results.config.rounds} rounds x ${results.config.durationS} s, ${results.config.connections} connections; whiskers: min-max of the rounds. ` +
      `Node ${v.node.replace(/^v/, '')}, Redis ${v.redis}, NestJS ${v.nestjs} (peer on ${v.peerNestjs}), ${results.machine.cores} shared cores.`,
    'class="note"',
  );
  // Legend entries, wrapped onto a second row when they would run past the right edge.
  let legendX = 20;
  let legendY = 58;
  const place = (itemWidth) => {
    if (legendX + itemWidth > width - 20) {
      legendX = 20;
      legendY += 18;
    }
  };
  for (const id of ids) {
    const name = id === 'peer-redis' ? `@node-idempotency/nestjs ${v.peer}, Redis` : NAMES[id];
    place(17 + name.length * 6.3);
    out.push(`<rect x="${legendX}" y="${legendY}" width="12" height="12" fill="${COLORS[id]}"/>`);
    text(legendX + 17, legendY + 10.5, name, 'class="legend"');
    legendX += 30 + name.length * 6.3;
  }
  place(70);
  line(legendX, legendY + 6, legendX + 22, legendY + 6, 'class="target"');
  text(legendX + 27, legendY + 10.5, 'target', 'class="legend"');
  legendX += 70;
  if (rows.some((r) => r.scenario === 'floor')) {
    place(150);
    line(legendX, legendY + 6, legendX + 22, legendY + 6, 'class="floor"');
    text(legendX + 27, legendY + 10.5, 'no-op interceptor', 'class="legend"');
  }

  for (const [p, [handler, title]] of PANELS.entries()) {
    const left = panelLeft[p];
    const right = left + panelWidth;
    text(left + panelWidth / 2, top - 14, title, 'class="panel" text-anchor="middle"');
    for (let tick = 0; tick <= yMax + 1e-9; tick += step) {
      line(left, y(tick), right, y(tick), `class="${Math.abs(tick - 1) < 1e-9 ? 'one' : 'grid'}"`);
      text(left - 6, y(tick) + 4, tick.toFixed(2), 'class="axis" text-anchor="end"');
    }
    const inset = 50; // room for the target labels left of our bars
    const groupWidth = (panelWidth - inset) / GROUPS.length;
    for (const [g, [scenario, label, goal]] of GROUPS.entries()) {
      const groupLeft = left + inset + g * groupWidth;
      const barWidth = Math.min(40, (groupWidth - 50) / ids.length);
      const barsLeft = groupLeft + (groupWidth - barWidth * ids.length) / 2;
      for (const [b, id] of ids.entries()) {
        const row = rows.find((r) => r.target === id && r.handler === handler && r.scenario === scenario);
        if (!row) continue;
        const x = barsLeft + b * barWidth;
        const { median, min, max } = row.ratio;
        out.push(
          `<rect x="${(x + 3).toFixed(1)}" y="${y(median).toFixed(1)}" width="${(barWidth - 6).toFixed(1)}" height="${(bottom - y(median)).toFixed(1)}" fill="${COLORS[id]}"><title>${escape(`${NAMES[id]}, ${label}: ${median.toFixed(2)}x (${min.toFixed(2)}-${max.toFixed(2)}), ${Math.round(row.reqPerSec.median)} req/s`)}</title></rect>`,
        );
        const cx = x + barWidth / 2;
        line(cx, y(min), cx, y(max), 'class="whisker"');
        line(cx - 4, y(min), cx + 4, y(min), 'class="whisker"');
        if (max > yMax) text(cx, top - 1, `${max.toFixed(1)}`, 'class="value clipped" text-anchor="middle"');
        else line(cx - 4, y(max), cx + 4, y(max), 'class="whisker"');
        // At the foot of the bar, where no whisker or target line runs.
        text(cx, bottom - 6, median.toFixed(2), `class="value ${id === 'ours-memory' ? '' : 'on-dark'}" text-anchor="middle"`);
      }
      // Targets for our Redis bar: the absolute floor, and the peer's ratio (x1.25 on first runs).
      const oursX = barsLeft;
      const marks = [[goal, `${goal}x`, 'target']];
      const vs = results.versusPeer?.[`${handler}/${scenario}`];
      if (vs) {
        const level = vs.peer * (scenario === 'first' ? 1.25 : 1);
        marks.push([level, scenario === 'first' ? '1.25x peer' : 'peer', 'target peer']);
      }
      // What a no-op interceptor leaves of the baseline: no interceptor-based library gets past it.
      const floor = rows.find((r) => r.target === 'ours-redis' && r.handler === handler && r.scenario === 'floor');
      if (floor && scenario === 'first') marks.push([floor.ratio.median, 'no-op', 'floor']);
      marks.sort((a, b) => b[0] - a[0]);
      let labelY = -Infinity;
      for (const [level, label, cls] of marks) {
        line(oursX, y(level), oursX + barWidth, y(level), `class="${cls}"`);
        labelY = Math.max(y(level) + 4, labelY + 11); // keep close labels apart
        text(oursX - 3, labelY, label, `class="target-label${cls === 'floor' ? ' floor-label' : ''}" text-anchor="end"`);
      }
      text(groupLeft + groupWidth / 2, bottom + 18, label, 'class="axis group" text-anchor="middle"');
    }
    line(left, bottom, right, bottom, 'class="base"');
  }
  text(20, height - 36, `1.00 = the library's own baseline (same route, no idempotency) in the same run. Targets on nestjs-idempotency with Redis:`, 'class="note"');
  text(20, height - 22, `first execution >= 0.85x and >= 1.25x the peer's ratio; replay >= 0.95x and not behind the peer's ratio.`, 'class="note"');
  text(20, height - 8, `Generated by npm run bench on ${results.date.slice(0, 10)} (commit ${v.commit}${v.libraryChangesUncommitted ? ' with uncommitted library changes' : ''}); numbers in bench/results/latest.json.`, 'class="note"');

  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif">
<style>
text { fill: #1f2937; }
.title { font-size: 15px; font-weight: 600; }
.note { font-size: 11px; fill: #4b5563; }
.legend { font-size: 11.5px; }
.panel { font-size: 13px; font-weight: 600; }
.axis { font-size: 11px; fill: #4b5563; }
.group { font-size: 12px; fill: #1f2937; }
.value { font-size: 10.5px; font-weight: 600; }
.clipped { font-weight: 400; fill: #6b7280; }
.on-dark { fill: #ffffff; }
.grid { stroke: #e5e7eb; stroke-width: 1; }
.one { stroke: #111827; stroke-width: 1.5; }
.base { stroke: #9ca3af; stroke-width: 1; }
.whisker { stroke: #111827; stroke-width: 1; }
.target { stroke: #dc2626; stroke-width: 2; stroke-dasharray: 5 3; }
.target.peer { stroke: #9a3412; stroke-dasharray: 2 2; }
.target-label { font-size: 9.5px; fill: #b91c1c; }
.floor { stroke: #6b7280; stroke-width: 2; }
.floor-label { fill: #4b5563; }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
${out.join('\n')}
</svg>
`;
}

if (require.main === module) {
  const dir = join(__dirname, 'results');
  const results = JSON.parse(readFileSync(join(dir, 'latest.json'), 'utf8'));
  writeFileSync(join(dir, 'latest.svg'), renderChart(results));
}

module.exports = { renderChart };
