// What each scenario sends on each entry point, how it is set up (a stored record to replay, a
// key held in progress), and the probe that checks it does what its name says before it is
// measured: a first execution runs the handler, a replay does not, a 409 and a 422 are refused
// as such. A scenario whose probe disagrees is reported, not measured.
const { randomUUID } = require('node:crypto');
const { CONNECTIONS, IN_FLIGHT } = require('./config');
const { control, post } = require('./apps');
const { send } = require('./loaders');

/** What each scenario is: its label, what its probe must see, what it is normalised by. */
const SCENARIOS = {
  plain: { label: 'plain', expect: 'executed' },
  plain1: { label: 'plain, 1 in flight', expect: 'executed' },
  plain16: { label: `plain, ${IN_FLIGHT} in flight`, expect: 'executed' },
  plainIo: { label: 'plain, ~5 ms I/O', expect: 'executed' },
  // Issue 18's floor: Nest's interceptor pipeline alone. Issue 41's floor is a lane of its own
  // (library `floor`, bench/floor), measured on the scenarios below.
  floor: { label: 'no-op interceptor', expect: 'executed', plain: 'plain' },
  first: { label: 'first execution', expect: 'executed', plain: 'plain' },
  first1: { label: 'first execution, 1 in flight', expect: 'executed', plain: 'plain1' },
  first16: {
    label: `first execution, ${IN_FLIGHT} in flight`,
    expect: 'executed',
    plain: 'plain16',
  },
  firstIo: { label: 'first execution, ~5 ms I/O', expect: 'executed', plain: 'plainIo' },
  replay: { label: 'replay', expect: 'replayed', plain: 'plain' },
  replay1: { label: 'replay, 1 in flight', expect: 'replayed', plain: 'plain1' },
  replay16: { label: `replay, ${IN_FLIGHT} in flight`, expect: 'replayed', plain: 'plain16' },
  replayIo: { label: 'replay, ~5 ms I/O', expect: 'replayed', plain: 'plainIo' },
  conflict: { label: '409 in progress', expect: 'conflict', plain: 'plain' },
  mismatch: { label: '422 key reused', expect: 'mismatch', plain: 'plain' },
  mismatchLarge: { label: '422 vs 900 KB record', expect: 'mismatch', plain: 'plain' },
};
/**
 * What a scenario is at heart: `replay1`, `replay16` and `replayIo` are replays, `mismatchLarge`
 * a 422.
 */
const base = (scenario) => scenario.replace(/(Io|16|1|Large)$/, '');
/**
 * Callers of a load: 1 or IN_FLIGHT for the scenarios named so (`first1`, `first16`), else
 * CONNECTIONS (the run() lanes: 1).
 */
const callers = (scenario, others) =>
  scenario.endsWith('16') ? IN_FLIGHT : /\D1$/.test(scenario) ? 1 : others;
const LOADER = {
  express: 'http',
  fastify: 'http',
  apollo: 'http',
  mercurius: 'http',
  grpc: 'grpc',
  tcp: 'tcp',
  socketio: 'socketio',
  run: 'run',
};

const FIELDS = 'id object status amount currency created customer description';
const graphql = (name, amount) => ({
  query: `mutation($a:Int!){${name}(amount:$a){${FIELDS}}}`,
  variables: { a: amount },
});

/** The request of `scenario` (the stored one with `stored: true`), in each kind's terms. */
function request(lane, scenario, key, { stored = false } = {}) {
  const b = base(scenario);
  const amount = b === 'mismatch' && !stored ? 1 : 100;
  const io = scenario.endsWith('Io') ? '-io' : '';
  switch (lane.kind) {
    case 'apollo':
    case 'mercurius':
      if (b === 'conflict')
        return {
          path: '/graphql',
          body: { query: `mutation{hold(key:${JSON.stringify(key)}){held completedAt}}` },
        };
      return { path: '/graphql', body: graphql(b === 'plain' ? 'payPlain' : 'pay', amount) };
    case 'grpc':
      if (b === 'conflict') return { method: 'Hold', request: { key } };
      return { method: b === 'plain' ? 'PayPlain' : 'Pay', request: { amount } };
    case 'tcp':
      if (b === 'conflict') return { pattern: 'hold', data: {} };
      return { pattern: b === 'plain' ? 'pay.plain' : 'pay', data: { amount } };
    case 'socketio':
      if (b === 'conflict') return { event: 'hold', data: {} };
      return { event: b === 'plain' ? 'pay.plain' : 'pay', data: { amount } };
    default: {
      if (b === 'conflict') return { path: '/hold', body: {} };
      const path = { plain: '/baseline', floor: '/intercepted' }[b] ?? '/idempotent';
      const body = scenario === 'mismatchLarge' && stored ? { size: 900_000 } : { amount };
      return { path: `${path}${io}`, body };
    }
  }
}

/** The gateway's socket.io URL. */
const wsUrl = (app) => `ws://127.0.0.1:${app.port}`;

/** Sends one request; resolves with { ok, text } (ok: the handler's answer, no refusal). */
async function once(app, req, key) {
  const { lane } = app;
  const loader = LOADER[lane.kind];
  if (loader === 'grpc')
    return send('grpc', 'probe', { address: `127.0.0.1:${app.port}`, ...req, key });
  if (loader === 'tcp') return send('tcp', 'probe', { port: app.port, ...req, key });
  if (loader === 'socketio') return send('socketio', 'probe', { url: wsUrl(app), ...req, key });
  const response = await post(
    `${app.base}${req.path}`,
    req.body,
    key ? { 'idempotency-key': key } : {},
  );
  const text = response.body.toString();
  const graphqlError = req.path === '/graphql' && /"errors"\s*:/.test(text);
  return {
    ok: response.status < 300 && !graphqlError,
    text: `${response.status} ${text.slice(0, 300)}`,
  };
}

/** Sets the scenario up; resolves with the key its load sends (none for plain and first). */
async function prepare(app, scenario) {
  const b = base(scenario);
  if (app.lane.kind === 'run') return (await control(app, '/prepare', { scenario })).key;
  if (b === 'replay' || b === 'mismatch') {
    const key = `${b}-${randomUUID()}`;
    const answer = await once(app, request(app.lane, scenario, key, { stored: true }), key);
    if (!answer.ok)
      throw new Error(`${app.lane.id} ${scenario}: storing the record failed: ${answer.text}`);
    return key;
  }
  if (b === 'conflict') {
    const key = `conflict-${randomUUID()}`;
    const req = request(app.lane, scenario, key);
    // Held until the end of the run: every request of the scenario finds it in progress.
    once(app, req, key).catch(() => {});
    await control(app, '/held', { key });
    return key;
  }
  return undefined;
}

/** What one request of the scenario did: executed, replayed, conflict, mismatch or an error. */
async function probe(app, scenario, key) {
  const probeKey = base(scenario) === 'first' ? `probe-${randomUUID()}` : key;
  if (app.lane.kind === 'run') {
    const answer = await control(app, '/probe', { scenario, key });
    return classify(answer.ok, answer.executions, answer.error ?? '');
  }
  const before = (await control(app, '/stats')).executions;
  const answer = await once(app, request(app.lane, scenario, probeKey), probeKey);
  const executions = (await control(app, '/stats')).executions - before;
  return classify(answer.ok, executions, answer.text ?? answer.error ?? '');
}

function classify(ok, executions, text) {
  if (ok) return executions > 0 ? 'executed' : 'replayed';
  if (/IN_PROGRESS|in progress|InProgress|still being processed|\b409\b|conflict/i.test(text))
    return 'conflict';
  if (/KEY_REUSED|reused|mismatch|Validation|\b422\b|payload/i.test(text)) return 'mismatch';
  return `error: ${text.slice(0, 160)}`;
}

/**
 * The load generator's job: `seconds` of load from CONNECTIONS callers (the run() lanes: one
 * caller, or IN_FLIGHT for the `16` scenarios), or `count` requests one after the other.
 */
function loadSpec(app, scenario, key, { seconds, count }) {
  const { lane } = app;
  const unique = base(scenario) === 'first';
  const req = request(lane, scenario, key);
  const connections = count ? 1 : callers(scenario, CONNECTIONS);
  const common = { connections, duration: seconds, count, amount: count, key, uniqueKey: unique };
  switch (LOADER[lane.kind]) {
    case 'run': {
      const concurrency = count ? 1 : callers(scenario, 1);
      return { scenario, key, concurrency, duration: seconds, count };
    }
    case 'grpc':
      return { ...common, address: `127.0.0.1:${app.port}`, ...req };
    case 'tcp':
      return { ...common, port: app.port, ...req };
    case 'socketio':
      return { ...common, url: wsUrl(app), ...req };
    default:
      return {
        ...common,
        url: `${app.base}${req.path}`,
        body: JSON.stringify(req.body),
        headers: key && !unique ? { 'idempotency-key': key } : {},
      };
  }
}

/** Runs one measurement ({ seconds } or { count }) through the lane's load generator. */
function load(app, scenario, key, how) {
  const spec = loadSpec(app, scenario, key, how);
  const loader = LOADER[app.lane.kind];
  return loader === 'run' ? control(app, '/measure', spec) : send(loader, 'measure', spec);
}

module.exports = { SCENARIOS, base, prepare, probe, load, loadSpec, LOADER };
