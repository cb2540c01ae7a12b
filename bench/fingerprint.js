// The request fingerprint's CPU cost against JSON.parse of the same body, in this process: a
// ratio, so the machine's speed and load cancel out. Each shape is about 1 MiB of JSON; the
// median of several runs after a warm-up is reported.
const { performance } = require('node:perf_hooks');

const SHAPES = {
  numbers: () => Array.from({ length: 1 << 19 }, (_, i) => i % 10),
  strings: () => Array.from({ length: 1 << 15 }, (_, i) => `item-${i}-${'x'.repeat(20)}`),
  smallObjects: () =>
    Array.from({ length: 1 << 14 }, (_, i) => ({ id: i, ok: true, name: `n${i}` })),
  wideObject: () => Object.fromEntries(Array.from({ length: 1 << 15 }, (_, i) => [`k${i}`, i])),
  // As text: JSON.stringify recurses and would overflow the stack; JSON.parse does not.
  deepArrays: () => `${'['.repeat(1 << 18)}${']'.repeat(1 << 18)}`,
  deepObjects: () => `${'{"a":'.repeat(1 << 16)}{}${',"b":1}'.repeat(1 << 16)}`,
  nestedRecords: () =>
    Array.from({ length: 1 << 11 }, (_, i) => ({
      id: i,
      customer: { name: `c${i}`, address: { city: 'Berlin', zip: '10115' } },
      items: [
        { sku: 'A', qty: 1 },
        { sku: 'B', qty: 2, tags: ['x', 'y'] },
      ],
    })),
};

const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];

/** fingerprint time / JSON.parse time per shape, with the absolute times of the median run. */
function fingerprintCost(fingerprint, runs = 7) {
  const rows = {};
  for (const [name, make] of Object.entries(SHAPES)) {
    const shape = make();
    const text = typeof shape === 'string' ? shape : JSON.stringify(shape);
    const parse = [];
    const hash = [];
    for (let run = 0; run < runs + 2; run++) {
      let started = performance.now();
      const body = JSON.parse(text);
      const parsed = performance.now() - started;
      started = performance.now();
      fingerprint(['POST', '/x'], body);
      const hashed = performance.now() - started;
      if (run >= 2) (parse.push(parsed), hash.push(hashed)); // the first two warm up
    }
    const [p, h] = [median(parse), median(hash)];
    rows[name] = {
      bytes: text.length,
      parseMs: +p.toFixed(2),
      fingerprintMs: +h.toFixed(2),
      ratio: +(h / p).toFixed(2),
    };
  }
  return rows;
}

module.exports = { fingerprintCost };

if (require.main === module) {
  const { fingerprint } = require(process.argv[2] ?? '../dist/utils/fingerprint');
  console.table(fingerprintCost(fingerprint));
}
