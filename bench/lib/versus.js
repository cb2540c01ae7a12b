// This library against a peer on the same path and store: each normalised by its own plain
// lane, paired per round (both ran in the same rounds of one group), and their CPU per request.
const { round, spread } = require('./stats');
const { SCENARIOS } = require('./scenarios');

const PAIRS = [
  { ours: 'ours-express-redis', peer: 'node-idempotency-express-redis' },
  { ours: 'ours-express-redis', peer: 'nestarc-express-redis', sameFramework: true },
  { ours: 'ours-run-redis', peer: 'powertools-run-redis' },
  { ours: 'ours-run-redis', peer: 'powertools-run-redis-cache' },
  { ours: 'ours-run-redis-cache', peer: 'powertools-run-redis-cache' },
];

const cpu = (m, key) => {
  const s = spread(
    m.samples.map((x) => x[key] ?? NaN),
    1,
  );
  return s && round(s.median, 1);
};

/** One entry per pair and scenario both measured. */
function versus(measurements) {
  const find = (lane, scenario) =>
    measurements.find(
      (m) => m.lane.id === lane && m.scenario === scenario && !m.skipped && m.samples.length,
    );
  const out = [];
  for (const pair of PAIRS) {
    for (const scenario of Object.keys(SCENARIOS)) {
      const plain = SCENARIOS[scenario].plain;
      if (!plain) continue;
      const [ours, peer, oursPlain, peerPlain] = [
        find(pair.ours, scenario),
        find(pair.peer, scenario),
        find(pair.ours, plain),
        find(pair.peer, plain),
      ];
      if (!ours || !peer || !oursPlain || !peerPlain) continue;
      const n = Math.min(
        ours.samples.length,
        peer.samples.length,
        oursPlain.samples.length,
        peerPlain.samples.length,
      );
      const rounds = [...Array(n).keys()];
      const ratio = (m, p, i) => m.samples[i].rps / p.samples[i].rps;
      const med = (values) => spread(values, 3);
      out.push({
        ours: pair.ours,
        peer: pair.peer,
        sameFramework: !!pair.sameFramework,
        scenario,
        // > 1: ours keeps more of its plain lane's throughput than the peer keeps of its own.
        normalised: med(rounds.map((i) => ratio(ours, oursPlain, i) / ratio(peer, peerPlain, i))),
        // Requests (calls) per second, ours over the peer's, in the same round: what run() is
        // judged by, where the plain lane (the function alone) costs next to nothing.
        raw: med(rounds.map((i) => ratio(ours, peer, i))),
        appCpuUs: { ours: cpu(ours, 'appCpuUs'), peer: cpu(peer, 'appCpuUs') },
        storeCpuUs: { ours: cpu(ours, 'storeCpuUs'), peer: cpu(peer, 'storeCpuUs') },
      });
    }
  }
  return out;
}

module.exports = { versus, PAIRS };
