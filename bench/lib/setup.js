// What the run needs before its first lane: the peers installed (each in its own folder, from its
// own lockfile), @nestarc/idempotency built from a checkout, a private redis-server, and the SQL servers checked (their leftover tables dropped).
// A lane whose peer or server is missing is left out with a message; under CI=true a missing SQL
// server fails the run, naming it.
const { spawnSync } = require('node:child_process');
const { existsSync, mkdtempSync } = require('node:fs');
const os = require('node:os');
const { join } = require('node:path');
const { buildNestarc, NESTARC_SOURCE } = require('../nestarc/build');
const { freePort, start } = require('./procs');
const { tableOf } = require('./apps');

const BENCH = join(__dirname, '..');

/** `npm ci --prefix <dir>` when the folder's node_modules lacks `probe`. */
function ensureInstalled(dir, probe) {
  if (existsSync(join(BENCH, dir, 'node_modules', probe))) return;
  console.error(`Installing bench/${dir} (npm ci --prefix bench/${dir}) ...`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--prefix', join(BENCH, dir), '--no-audit', '--no-fund'], {
    stdio: ['ignore', 2, 2],
  });
  if (result.status !== 0) throw new Error(`npm ci --prefix bench/${dir} failed`);
}

function preparePeers() {
  ensureInstalled('peer', '@node-idempotency/nestjs');
  ensureInstalled('peer11', '@node-idempotency/nestjs');
  ensureInstalled('powertools', '@aws-lambda-powertools/idempotency');
  const nestarc = buildNestarc();
  if (!nestarc) {
    console.error(
      `@nestarc/idempotency lanes left out: it is not on the npm registry, and there is no checkout ` +
        `of github.com/nestarc/idempotency at ${NESTARC_SOURCE} (set BENCH_NESTARC_SOURCE).`,
    );
  }
  return { nestarc: !!nestarc };
}

async function startRedis() {
  const dir = mkdtempSync(join(os.tmpdir(), 'bench-redis-'));
  const port = await freePort();
  const { pid, out } = await start(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { ready: /Ready to accept connections/, name: 'redis-server' },
  );
  return { url: `redis://127.0.0.1:${port}`, pid, version: /version=([\d.]+)/.exec(out)?.[1] };
}

const tables = (lane) => [`${tableOf(lane)}_steps`, tableOf(lane)];

/** Whether the SQL server answers; drops the tables `lanes` would use. */
async function checkSql(store, url, lanes) {
  let client;
  try {
    if (store === 'postgres') {
      const { Client } = require('pg');
      client = new Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
      await client.connect();
      const version = (await client.query('SHOW server_version')).rows[0].server_version;
      for (const table of lanes.flatMap(tables))
        await client.query(`DROP TABLE IF EXISTS "${table}"`);
      return { ok: true, version: `PostgreSQL ${version}` };
    }
    const mysql = require('mysql2/promise');
    client = await mysql.createConnection({ uri: url, connectTimeout: 2_000 });
    const [[row]] = await client.query('SELECT VERSION() AS v');
    for (const table of lanes.flatMap(tables))
      await client.query(`DROP TABLE IF EXISTS \`${table}\``);
    return { ok: true, version: row.v };
  } catch (error) {
    const name = store === 'postgres' ? 'PostgreSQL' : 'MySQL/MariaDB';
    const message = `${name} does not answer at ${url} (${error.message})`;
    if (process.env.CI === 'true')
      throw new Error(`${message}; the bench's ${store} lanes need it.`);
    console.error(`${store} lanes left out: ${message}`);
    return { ok: false };
  } finally {
    await client?.end();
  }
}

module.exports = { preparePeers, startRedis, checkSql };
