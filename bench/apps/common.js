// What every app under test shares: the library it loads (LIBRARY, default dist/), the store and
// variant it runs with, counters of its store round trips and handler runs, and a small control
// server (plain node:http, beside the transport under test) through which bench/run.js holds and
// releases requests, and reads the counters.
// Env: LIBRARY, STORE (memory|redis|postgres|mysql), REDIS_URL, KEY_PREFIX, POSTGRES_URL,
// MYSQL_URL, TABLE, VARIANT (comma list: enc = encryption, prop = keyDerivationSecret +
// propagateKeys, secret = keyDerivationSecret alone, steps = a resumable run of 3 steps: see
// apps/runner.js), LOCAL_CACHE=1 (localReplayCache on), BENCH_MODULE_OPTIONS (JSON merged into
// forRoot's options).
const { createRequire } = require('node:module');
const { randomBytes } = require('node:crypto');
const http = require('node:http');
const { join, resolve } = require('node:path');
const v8 = require('node:v8');
const holds = require('../holds');

const LIBRARY = resolve(process.env.LIBRARY ?? join(__dirname, '..', '..', 'dist'));
/** Loads a package as the library resolves it (NestJS, ioredis, pg...): one instance for both. */
const load = createRequire(join(LIBRARY, 'index.js'));

const counters = { storeCalls: 0, executions: 0 };

function count(proto, method, filter) {
  const original = proto[method];
  proto[method] = function counted(...args) {
    if (!filter || filter(args)) counters.storeCalls++;
    return original.apply(this, args);
  };
}

// mysql2's commands that are a round trip of their own (the rest: handshake, quit...).
const MYSQL_CALLS = new Set(['Query', 'Execute', 'Prepare']);

/**
 * Counts what the store client sends: ioredis commands (scripts count once: what runs inside
 * them is no round trip), pg queries (BEGIN and COMMIT included), mysql2 commands. node-postgres
 * sends one query per round trip; ioredis may put several commands in one write (that is the
 * point of its pipelining), so for Redis this counts commands, not writes.
 */
function countStoreCalls(store) {
  if (store === 'redis') count(load('ioredis').Redis.prototype, 'sendCommand');
  if (store === 'postgres') count(load('pg').Client.prototype, 'query');
  if (store === 'mysql') {
    const base = Object.getPrototypeOf(load('mysql2').Connection.prototype);
    count(base, 'addCommand', ([command]) => MYSQL_CALLS.has(command?.constructor?.name));
  }
}

/** forRoot() options for STORE and VARIANT. */
function moduleOptions() {
  const store = process.env.STORE ?? 'memory';
  countStoreCalls(store);
  const { MemoryIdempotencyStore } = load(LIBRARY);
  const table = process.env.TABLE;
  const stores = {
    // Room for every record of a run (its defaults are 10 000 and 32 MiB): a first-execution
    // load would otherwise evict the replay scenario's record within a second.
    memory: () => ({
      store: new MemoryIdempotencyStore({ maxEntries: 5_000_000, maxBytes: 4 * 2 ** 30 }),
    }),
    redis: () => ({ redis: process.env.REDIS_URL }),
    // Pools kept warm between measurements (no idle timeout): a busy app's pool never idles, and
    // a backend that quit would take its CPU time with it.
    postgres: () => ({
      postgres: {
        connectionString: process.env.POSTGRES_URL,
        table,
        ensureSchema: true,
        poolConfig: { idleTimeoutMillis: 0 },
      },
    }),
    mysql: () => ({ mysql: { uri: process.env.MYSQL_URL, table, ensureSchema: true } }),
  };
  const variant = variants();
  return {
    ...stores[store](),
    ...(process.env.KEY_PREFIX && { keyPrefix: process.env.KEY_PREFIX }),
    ...(variant.has('enc') && { encryption: { keys: [randomBytes(32)] } }),
    ...(variant.has('prop') && { keyDerivationSecret: randomBytes(32), propagateKeys: true }),
    ...(variant.has('secret') && { keyDerivationSecret: randomBytes(32) }),
    ...(process.env.LOCAL_CACHE === '1' && { localReplayCache: true }),
    ...JSON.parse(process.env.BENCH_MODULE_OPTIONS || '{}'),
  };
}

/**
 * Bytes this process has allocated on the JS heap since it loaded this file, about: what every
 * collection since freed (V8's GC profiler reports the heap's use before and after each), plus
 * what the heap holds now over what it held then. bench/run.js reads it before and after a load,
 * so a lane's allocation per request is measured, not inferred from its GC time.
 */
const allocation = { profiler: new v8.GCProfiler(), freed: 0, used: 0 };
allocation.profiler.start();
allocation.used = v8.getHeapStatistics().used_heap_size;
function allocatedBytes() {
  const { statistics } = allocation.profiler.stop();
  allocation.profiler.start();
  for (const { beforeGC, afterGC } of statistics) {
    allocation.freed += beforeGC.heapStatistics.usedHeapSize - afterGC.heapStatistics.usedHeapSize;
  }
  return allocation.freed + v8.getHeapStatistics().used_heap_size - allocation.used;
}

/** A handler ran: how a probe tells a first execution from a replay on any app. */
const executed = () => counters.executions++;

function readJson(req) {
  return new Promise((done) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => done(text ? JSON.parse(text) : {}));
  });
}

/**
 * The CPU profiler of this process (node:inspector), started and stopped by bench/profile.js;
 * with `heap`, V8's sampling heap profiler instead (a sample every 512 bytes allocated, those
 * collected since kept: what the load allocated, not what it left).
 */
let session;
async function profiler({ action, heap }) {
  const inspector = require('node:inspector');
  const post = (method, params) =>
    new Promise((done, fail) =>
      session.post(method, params, (error, result) => (error ? fail(error) : done(result))),
    );
  if (action === 'start') {
    session = new inspector.Session();
    session.connect();
    if (heap) {
      await post('HeapProfiler.enable');
      await post('HeapProfiler.startSampling', {
        samplingInterval: 512,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    } else {
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: 100 });
      await post('Profiler.start');
    }
    return {};
  }
  const { profile } = await post(heap ? 'HeapProfiler.stopSampling' : 'Profiler.stop');
  session.disconnect();
  return { profile };
}

/**
 * The control server: GET /stats (counters, rss, allocated bytes), POST /held {key} (answers once a handler holds the
 * key), POST /release {key}, POST /profile {action: start|stop}, and `routes` of the app's own
 * (path -> async (body) => answer).
 */
function startControl(routes = {}) {
  const all = {
    '/stats': async () => ({
      ...counters,
      rss: process.memoryUsage.rss(),
      allocated: allocatedBytes(),
    }),
    '/held': async ({ key }) => ({ held: await holds.whenHeld(key) }),
    '/release': async ({ key }) => ({ released: holds.release(key) }),
    '/profile': profiler,
    ...routes,
  };
  const server = http.createServer(async (req, res) => {
    try {
      const route = all[req.url];
      if (!route) throw new Error(`no control route ${req.url}`);
      const answer = await route(await readJson(req));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(answer));
    } catch (error) {
      res.statusCode = 500;
      res.end(JSON.stringify({ error: String(error?.stack ?? error) }));
    }
  });
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done(server.address().port)));
}

/** Tells bench/run.js the app is up: `READY <port> <control port>`. */
async function ready(port, routes) {
  // bench/cluster.js's workers share their listening sockets: no control server there.
  const control = process.env.NO_CONTROL ? 0 : await startControl(routes);
  process.stdout.write(`READY ${port} ${control}\n`);
}

/**
 * Decorates `name` of `Class.prototype` as TypeScript would (method decorators, then parameter
 * decorators by index): the apps are plain JS.
 */
function decorate(Class, name, decorators, params = []) {
  const proto = Class.prototype;
  params.forEach((param, index) => param && param(proto, name, index));
  Reflect.decorate(decorators, proto, name, Object.getOwnPropertyDescriptor(proto, name));
}

/** The lane's VARIANT, as a set of names. */
const variants = () => new Set((process.env.VARIANT ?? '').split(',').filter(Boolean));

module.exports = {
  LIBRARY,
  variants,
  load,
  counters,
  countStoreCalls,
  executed,
  moduleOptions,
  ready,
  decorate,
  startControl,
};
