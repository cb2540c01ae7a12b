// Which lanes npm run bench measures, in which groups. A lane is one app process: a library
// (this one or a peer), an entry point, a store and a variant, with the scenarios measured on it;
// every lane has its own plain scenario (the same entry point without idempotency) to be
// normalised by. A group's apps run at the same time and its measurements are interleaved in
// rounds (odd rounds reversed), so lanes compared with each other (ours and a peer) sit in one
// group. Not the whole matrix: every entry point meets every store at least once (the socket.io
// gateway: Redis only), but 409, 422, the variants and the peers only where they say something
// new (see bench/README.md, "Lanes").
const { IO } = require('./config');

const ENTRY = {
  express: 'HTTP Express',
  fastify: 'HTTP Fastify',
  apollo: 'GraphQL Apollo',
  mercurius: 'GraphQL Mercurius',
  grpc: 'gRPC unary',
  tcp: 'TCP message',
  socketio: 'socket.io gateway',
  run: 'run()',
};
const STORE = { memory: 'memory', redis: 'Redis', postgres: 'PostgreSQL', mysql: 'MariaDB' };
const VARIANT = {
  enc: 'encryption',
  prop: 'propagateKeys',
  secret: 'keyDerivationSecret',
  steps: '3 steps',
};
const LIBRARY = {
  ours: 'nestjs-idempotency',
  'node-idempotency': '@node-idempotency/nestjs',
  'node-idempotency-11': '@node-idempotency/nestjs',
  nestarc: '@nestarc/idempotency',
  powertools: 'Powertools makeIdempotent',
  floor: 'the floor',
};

const ALL = ['first', 'replay', 'conflict', 'mismatch'];
const withIo = (scenarios) => (IO ? [...scenarios, 'plainIo', 'firstIo', 'replayIo'] : scenarios);

function lane(group, kind, store, { library = 'ours', variant = [], scenarios, ...extra } = {}) {
  const parts = [library === 'ours' ? 'ours' : library, kind, store, ...variant];
  if (extra.localCache) parts.push('cache');
  const id = parts.join('-');
  const label = [
    library === 'ours' ? ENTRY[kind] : LIBRARY[library],
    extra.localCache ? (library === 'ours' ? ' (localReplayCache)' : ' (local cache on)') : '',
    library === 'nestarc' || library === 'floor' ? `, ${ENTRY[kind]}` : '',
    library === 'node-idempotency' ? ' on NestJS 10' : '',
    library === 'node-idempotency-11' ? ' on NestJS 11' : '',
    `, ${STORE[store]}`,
    ...variant.map((v) => `, ${VARIANT[v]}`),
  ].join('');
  const plains = [
    'plain',
    ...(scenarios.some((s) => /\D1$/.test(s)) ? ['plain1'] : []),
    ...(scenarios.some((s) => s.endsWith('16')) ? ['plain16'] : []),
  ];
  return {
    id,
    group,
    kind,
    store,
    library,
    variant,
    label,
    scenarios: [...plains, ...scenarios],
    ...extra,
  };
}

const ENTRY_POINTS = ['fastify', 'apollo', 'mercurius', 'grpc', 'tcp'];
const RUN = ['first', 'replay', 'conflict', 'mismatch', 'first16', 'replay16'];
const RUN_PEER = RUN.filter((s) => s !== 'mismatch');
// HTTP at 1 and 16 in flight (connections), beside the 20 of the other scenarios: the paths
// measured against the floor.
const HTTP_1_16 = ['first1', 'replay1', 'first16', 'replay16'];

/** The groups, in the order they run; `coverage` groups run fewer rounds. */
const GROUPS = [
  {
    name: 'http',
    title: 'HTTP on Redis against the peers',
    lanes: [
      lane('http', 'express', 'redis', {
        scenarios: withIo(['floor', ...ALL, 'mismatchLarge', ...HTTP_1_16]),
        roundTrips: true,
        storedBytes: true,
        wait: true,
      }),
      // localReplayCache: a replay answered from the process, no store call.
      lane('http', 'express', 'redis', {
        localCache: true,
        scenarios: ['first', 'replay'],
        roundTrips: true,
      }),
      lane('http', 'express', 'redis', {
        library: 'node-idempotency',
        scenarios: withIo(ALL),
        roundTrips: true,
        storedBytes: true,
      }),
      // The same peer on the root's NestJS 11 (bench/peer11, its peer range overridden): the
      // framework's share of the difference, measured.
      lane('http', 'express', 'redis', {
        library: 'node-idempotency-11',
        peerDir: 'peer11',
        scenarios: withIo(ALL),
        roundTrips: true,
      }),
      // The floor (bench/floor): the least work a fenced layer must do on this path.
      lane('http', 'express', 'redis', {
        library: 'floor',
        scenarios: withIo(['first', 'replay', 'conflict', ...HTTP_1_16]),
        roundTrips: true,
        storedBytes: true,
      }),
      lane('http', 'express', 'redis', {
        library: 'nestarc',
        scenarios: withIo(ALL),
        roundTrips: true,
        storedBytes: true,
      }),
    ],
  },
  {
    name: 'run',
    title: 'run() against Powertools',
    lanes: [
      ...['redis', 'memory', 'postgres', 'mysql'].map((store) =>
        lane('run', 'run', store, { scenarios: RUN, roundTrips: store === 'redis' }),
      ),
      lane('run', 'run', 'redis', { variant: ['enc'], scenarios: ['first', 'replay'] }),
      lane('run', 'run', 'redis', { localCache: true, scenarios: ['first', 'replay', 'replay16'] }),
      // No 422 for Powertools: see bench/powertools/runner.js.
      lane('run', 'run', 'redis', { library: 'powertools', scenarios: RUN_PEER, roundTrips: true }),
      lane('run', 'run', 'redis', { library: 'powertools', localCache: true, scenarios: RUN_PEER }),
      // The floor's run(key, fn): no fingerprint, so no 422; a duplicate in progress is refused.
      lane('run', 'run', 'redis', { library: 'floor', scenarios: RUN_PEER, roundTrips: true }),
      // And on the SQL stores (bench/floor/floor-sql.js), beside ours-run-postgres and -mysql.
      ...['postgres', 'mysql'].map((store) =>
        lane('run', 'run', store, { library: 'floor', scenarios: RUN_PEER }),
      ),
    ],
  },
  {
    name: 'steps',
    title: 'run() with 3 steps (resumable) on each store',
    lanes: ['redis', 'postgres', 'mysql', 'memory'].map((store) =>
      lane('steps', 'run', store, {
        variant: ['steps'],
        scenarios: ['first', 'replay'],
        roundTrips: store === 'redis',
      }),
    ),
  },
  {
    name: 'stores',
    title: 'HTTP Express on every store',
    lanes: [
      ...['memory', 'postgres', 'mysql'].map((store) =>
        lane('stores', 'express', store, { scenarios: ALL, wait: store === 'memory' }),
      ),
      // The floor's interceptor on the SQL stores (bench/floor/floor-sql.js).
      ...['postgres', 'mysql'].map((store) =>
        lane('stores', 'express', store, {
          library: 'floor',
          scenarios: ['first', 'replay', 'conflict'],
        }),
      ),
    ],
  },
  {
    name: 'entry',
    title: 'Every entry point on Redis',
    // The socket.io gateway here only: its store path is every entry point's.
    lanes: [...ENTRY_POINTS, 'socketio'].map((kind) =>
      lane('entry', kind, 'redis', { scenarios: ALL }),
    ),
  },
  ...['memory', 'postgres', 'mysql'].map((store) => ({
    name: `entry-${store}`,
    title: `Every entry point on ${STORE[store]}`,
    coverage: true,
    lanes: ENTRY_POINTS.map((kind) =>
      lane(`entry-${store}`, kind, store, { scenarios: ['first', 'replay'] }),
    ),
  })),
  {
    name: 'variants',
    title: 'Encryption and propagateKeys',
    coverage: true,
    lanes: ['redis', 'memory'].flatMap((store) =>
      ['enc', 'prop'].map((v) =>
        lane('variants', 'express', store, { variant: [v], scenarios: ['first', 'replay'] }),
      ),
    ),
  },
];

module.exports = { GROUPS, ENTRY, STORE, VARIANT, LIBRARY };
