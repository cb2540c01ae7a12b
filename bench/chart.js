// The README's chart as a self-contained SVG (plain JS, no dependencies): for every lane, its
// first executions and replays as req/s relative to the lane's own plain path, with the min-max
// of the rounds and a line at 1.0. Not the run() lanes: their plain path is the function alone,
// a call of a microsecond, so their ratios are all near zero (the table has their figures).
// `node bench/report.js` redraws it from latest.json.

const escape = (text) =>
  String(text).replace(
    /[&<>"]/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c],
  );

const BARS = [
  ['first', 'first execution', '#1d4ed8'],
  ['replay', 'replay', '#93c5fd'],
];
const PEER_COLORS = { first: '#c2410c', replay: '#fdba74' };

function renderChart(results) {
  const rows = [];
  for (const r of results.throughput) {
    if (!BARS.some(([s]) => s === r.scenario) || r.skipped || !r.ratio || r.kind === 'run')
      continue;
    let entry = rows.find((e) => e.lane === r.lane);
    if (!entry)
      rows.push((entry = { lane: r.lane, label: r.label, ours: r.library === 'ours', bars: {} }));
    entry.bars[r.scenario] = r.ratio;
  }
  const left = 330;
  const right = 880;
  const top = 70;
  const rowHeight = 24;
  const height = top + rows.length * rowHeight + 50;
  const width = 920;
  const max =
    Math.max(1.25, ...rows.flatMap((e) => Object.values(e.bars).map((s) => s.median))) * 1.1;
  const scale = (v) => left + (Math.min(v, max) / max) * (right - left);
  const out = [];
  const text = (tx, ty, content, attrs = '') =>
    out.push(`<text x="${tx.toFixed(1)}" y="${ty.toFixed(1)}" ${attrs}>${escape(content)}</text>`);
  const v = results.versions;
  text(
    20,
    24,
    'Requests per second relative to the same path without idempotency (higher is better)',
    'class="title"',
  );
  text(
    20,
    42,
    `${results.quick ? 'Quick run, not for comparison. ' : ''}Median of the rounds, whiskers min-max. Node ${v.node.replace(/^v/, '')}, ` +
      `${results.machine.cores} cores, ${results.date.slice(0, 10)}, commit ${v.commit}.`,
    'class="note"',
  );
  let lx = 20;
  for (const [scenario, label, color] of BARS) {
    out.push(`<rect x="${lx}" y="52" width="11" height="11" fill="${color}"/>`);
    text(lx + 15, 62, `${label} (this library)`, 'class="legend"');
    lx += 190;
    out.push(`<rect x="${lx}" y="52" width="11" height="11" fill="${PEER_COLORS[scenario]}"/>`);
    text(lx + 15, 62, `${label} (a peer)`, 'class="legend"');
    lx += 150;
  }
  for (let tick = 0; tick <= max; tick += 0.25) {
    const tx = scale(tick);
    out.push(
      `<line x1="${tx.toFixed(1)}" y1="${top - 4}" x2="${tx.toFixed(1)}" y2="${top + rows.length * rowHeight}" class="${Math.abs(tick - 1) < 1e-9 ? 'one' : 'grid'}"/>`,
    );
    text(
      tx,
      top + rows.length * rowHeight + 16,
      tick.toFixed(2),
      'class="axis" text-anchor="middle"',
    );
  }
  rows.forEach((entry, i) => {
    const y = top + i * rowHeight;
    text(left - 8, y + 15, entry.label, 'class="label" text-anchor="end"');
    BARS.forEach(([scenario, label, color], b) => {
      const s = entry.bars[scenario];
      if (!s) return;
      const by = y + 3 + b * 9;
      const fill = entry.ours ? color : PEER_COLORS[scenario];
      out.push(
        `<rect x="${left}" y="${by}" width="${(scale(s.median) - left).toFixed(1)}" height="8" fill="${fill}"><title>${escape(`${entry.label}, ${label}: ${s.median.toFixed(2)}x (${s.min.toFixed(2)}-${s.max.toFixed(2)})`)}</title></rect>`,
      );
      out.push(
        `<line x1="${scale(s.min).toFixed(1)}" y1="${by + 4}" x2="${scale(s.max).toFixed(1)}" y2="${by + 4}" class="whisker"/>`,
      );
    });
  });
  text(
    20,
    height - 12,
    'Each lane is normalised by its own plain path in the same rounds; the table in bench/README.md has the CPU per request.',
    'class="note"',
  );
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif">
<style>
text { fill: #1f2937; }
.title { font-size: 15px; font-weight: 600; }
.note { font-size: 11px; fill: #4b5563; }
.legend { font-size: 11.5px; }
.label { font-size: 11.5px; }
.axis { font-size: 10.5px; fill: #4b5563; }
.grid { stroke: #e5e7eb; stroke-width: 1; }
.one { stroke: #111827; stroke-width: 1.5; }
.whisker { stroke: #111827; stroke-width: 1; }
</style>
<rect width="100%" height="100%" fill="#ffffff"/>
${out.join('\n')}
</svg>
`;
}

module.exports = { renderChart };
