// Rewrites the results section of bench/README.md (between its markers) and the chart from
// bench/results/latest.json, e.g. after editing how they are drawn: `node bench/report.js`.
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { writeReadme } = require('./lib/readme');
const { renderChart } = require('./chart');

const dir = join(__dirname, 'results');
const results = JSON.parse(readFileSync(join(dir, 'latest.json'), 'utf8'));
writeFileSync(join(dir, 'latest.svg'), renderChart(results));
writeReadme(results);
