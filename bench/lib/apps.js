// Starting the app of a lane (its own process) and talking to its control server.
const http = require('node:http');
const { join } = require('node:path');
const { start, stop } = require('./procs');

const BENCH = join(__dirname, '..');
const SCRIPTS = {
  ours: (lane) =>
    ({
      express: 'apps/http.js',
      fastify: 'apps/http.js',
      apollo: 'apps/graphql.js',
      mercurius: 'apps/graphql.js',
      grpc: 'apps/grpc.js',
      tcp: 'apps/tcp.js',
      socketio: 'apps/gateway.js',
      run: 'apps/runner.js',
    })[lane.kind],
  'node-idempotency': () => 'peer/app.js',
  'node-idempotency-11': () => 'peer/app.js',
  nestarc: () => 'nestarc/app.js',
  powertools: () => 'powertools/runner.js',
  floor: (lane) => (lane.kind === 'run' ? 'floor/runner.js' : 'floor/app.js'),
};

/**
 * The table a SQL lane's records go to (dropped before and after the run, with its steps table
 * `<table>_steps`). It ends in `_records`: one lane's steps table is never another's records.
 */
const tableOf = (lane) => `bench_${lane.id.replace(/[^a-z0-9]/gi, '_')}_records`;

/**
 * Starts the lane's app; resolves with { lane, pid, base, port, control }. `library` runs another
 * build of this library (LIBRARY), `nodeBin` another Node (bench/als.js).
 */
async function startApp(lane, { redisUrl, postgresUrl, mysqlUrl, library, nodeBin }) {
  const env = {
    STORE: lane.store,
    REDIS_URL: redisUrl,
    KEY_PREFIX: `bench:${lane.id}:`,
    POSTGRES_URL: postgresUrl,
    MYSQL_URL: mysqlUrl,
    TABLE: tableOf(lane),
    VARIANT: lane.variant.join(','),
    ADAPTER: lane.kind === 'fastify' ? 'fastify' : 'express',
    DRIVER: lane.kind === 'mercurius' ? 'mercurius' : 'apollo',
    LOCAL_CACHE: lane.localCache ? '1' : '0',
    // bench/peer/app.js loads its packages from this folder (bench/peer11: NestJS 11).
    ...(lane.peerDir && { PEER_DIR: join(BENCH, lane.peerDir) }),
    ...(library && { LIBRARY: library }),
  };
  const script = join(BENCH, SCRIPTS[lane.library](lane));
  const { match, pid, child } = await start(nodeBin ?? process.execPath, [script], {
    env,
    ready: /READY (\d+) (\d+)/,
    name: lane.id,
  });
  const port = Number(match[1]);
  return {
    lane,
    pid,
    child,
    port,
    base: `http://127.0.0.1:${port}`,
    control: `http://127.0.0.1:${match[2]}`,
  };
}

const stopApp = (app) => stop(app.child);

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** POSTs JSON; resolves with status, headers, body (a Buffer) and the moment it arrived (ms). */
function post(url, body = {}, headers = {}) {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...headers,
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            headers: res.headers,
            body: Buffer.concat(chunks),
            receivedAt: performance.timeOrigin + performance.now(),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A control route of the app: its JSON answer. */
async function control(app, route, body = {}) {
  const response = await post(`${app.control}${route}`, body);
  const answer = JSON.parse(response.body);
  if (response.status !== 200) throw new Error(`${app.lane.id} ${route}: ${answer.error}`);
  return answer;
}

module.exports = { startApp, stopApp, post, control, tableOf, agent };
