// Rewrites the results section of bench/README.md (between its markers), the chart and the targets from
// bench/results/latest.json, e.g. after editing how they are drawn: `node bench/report.js`.
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { writeReadme } = require('./lib/readme');
const { renderChart } = require('./chart');
const { targets } = require('./lib/targets');

const dir = join(__dirname, 'results');
const results = JSON.parse(readFileSync(join(dir, 'latest.json'), 'utf8'));
// Recomputed, so that a change to how targets read the figures shows without a new run.
results.targets = targets(results);
writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 1)}\n`);
writeFileSync(join(dir, 'latest.svg'), renderChart(results));
writeReadme(results);
