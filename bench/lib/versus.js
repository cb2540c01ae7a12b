// This library against a peer on the same path and store: each normalised by its own plain
// lane, paired per round (both ran in the same rounds of one group), and their CPU per request.
// Against the floor (bench/floor) also what ours costs over what the floor costs (`overFloor`),
// on Redis and on the SQL stores.
const { round, spread } = require('./stats');
const { SCENARIOS } = require('./scenarios');

const PAIRS = [
  { ours: 'ours-express-redis', peer: 'node-idempotency-express-redis' },
  { ours: 'ours-express-redis', peer: 'node-idempotency-11-express-redis', sameFramework: true },
  // The framework's share: the same peer on NestJS 11 over itself on NestJS 10.
  { ours: 'node-idempotency-11-express-redis', peer: 'node-idempotency-express-redis' },
  { ours: 'ours-express-redis', peer: 'floor-express-redis', sameFramework: true, floor: true },
  { ours: 'ours-run-redis', peer: 'floor-run-redis', floor: true },
  // The floor on the SQL stores (bench/floor/floor-sql.js).
  ...['postgres', 'mysql'].flatMap((store) => [
    { ours: `ours-run-${store}`, peer: `floor-run-${store}`, floor: true },
    {
      ours: `ours-express-${store}`,
      peer: `floor-express-${store}`,
      sameFramework: true,
      floor: true,
    },
  ]),
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

const bytes = (m) => {
  const s = spread(
    m.samples.map((x) => x.allocBytes ?? NaN),
    0,
  );
  return s && s.median;
};

/**
 * Ours over the floor, paired per round: wall time per request (1 / req/s: what the load's
 * callers wait per request between them) and app CPU, each net of its own lane's plain scenario
 * (the same route without the layer) and in total, and the store's CPU. A net ratio is left out
 * (NaN) in a round where the floor's net is not above zero: a replay can be cheaper than the
 * plain route, which runs the handler.
 */
function overFloor(ours, floor, oursPlain, floorPlain, rounds) {
  const wall = (m, i) => 1e6 / m.samples[i].rps;
  const app = (m, i) => m.samples[i].appCpuUs;
  const net = (of, i) => {
    const d = of(floor, i) - of(floorPlain, i);
    return d > 0 ? (of(ours, i) - of(oursPlain, i)) / d : NaN;
  };
  const med = (values) => spread(values, 2);
  return {
    wall: med(rounds.map((i) => net(wall, i))),
    wallTotal: med(rounds.map((i) => wall(ours, i) / wall(floor, i))),
    appCpu: med(rounds.map((i) => net(app, i))),
    appCpuTotal: med(rounds.map((i) => app(ours, i) / app(floor, i))),
    // Redis, or the SQL server's backends (threads) serving each app.
    storeCpu: med(rounds.map((i) => ours.samples[i].storeCpuUs / floor.samples[i].storeCpuUs)),
  };
}

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
        ...(pair.floor && { floor: true }),
        scenario,
        // > 1: ours keeps more of its plain lane's throughput than the peer keeps of its own.
        normalised: med(rounds.map((i) => ratio(ours, oursPlain, i) / ratio(peer, peerPlain, i))),
        // Requests (calls) per second, ours over the peer's, in the same round: what run() is
        // judged by, where the plain lane (the function alone) costs next to nothing.
        raw: med(rounds.map((i) => ratio(ours, peer, i))),
        appCpuUs: { ours: cpu(ours, 'appCpuUs'), peer: cpu(peer, 'appCpuUs') },
        storeCpuUs: { ours: cpu(ours, 'storeCpuUs'), peer: cpu(peer, 'storeCpuUs') },
        // Bytes the app allocated per request (bench/apps/common.js), medians of the rounds.
        allocBytes: { ours: bytes(ours), peer: bytes(peer) },
        ...(pair.floor && { overFloor: overFloor(ours, peer, oursPlain, peerPlain, rounds) }),
      });
    }
  }
  return out;
}

module.exports = { versus, PAIRS };
