// `node bench/clients.js`: what a Redis command costs the client, in CPU µs per command, for
// ioredis (this library's client; with and without auto-pipelining) and node-redis 4 (the peer's,
// from bench/peer). Runs GET of a small value and EVALSHA of lua/claim-2.lua on a key that holds
// a completed record (the replay path), 20 concurrent callers, on a private redis-server; prints
// the median of 5 rounds. The claim is also sent the way this library's Redis store sends it on
// one node (its script on a socket corked for the event-loop turn; from dist/). Run bench/run.js
// once first (it builds dist/ and installs bench/peer).
const { spawn } = require('node:child_process');
const { readFileSync } = require('node:fs');
const { createServer } = require('node:net');
const { join } = require('node:path');
const Redis = require('ioredis').default;
const { createClient } = require(join(__dirname, 'peer', 'node_modules', 'redis'));
const { defineIdempotencyCommands } = require('../dist/stores/redis/redis-scripts');

const CALLERS = 20;
const COMMANDS = 30_000;
const ROUNDS = 5;

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

/** Client CPU per command, in µs, with CALLERS callers each awaiting one command at a time. */
async function cpuPerCommand(command) {
  for (let i = 0; i < 3_000; i++) await command();
  const before = process.cpuUsage();
  let sent = 0;
  const caller = async () => {
    while (sent++ < COMMANDS) await command();
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / COMMANDS;
}

async function main() {
  const port = await freePort();
  const server = spawn('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
  ]);
  process.on('exit', () => server.kill('SIGKILL'));
  await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('Ready to accept connections')) resolve();
    });
    server.on('error', reject);
    server.on('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
  });
  const url = `redis://127.0.0.1:${port}`;
  const pipelined = new Redis(url, { enableAutoPipelining: true });
  const plain = new Redis(url);
  const nodeRedis = createClient({ url });
  await nodeRedis.connect();

  const sha = await plain.script(
    'LOAD',
    readFileSync(join(__dirname, '..', 'lua', 'claim-2.lua'), 'utf8'),
  );
  // A completed record ('c', fingerprint, meta, body as MessagePack), so EVALSHA takes the replay path.
  await plain.eval(
    "redis.call('SET', KEYS[1], cmsgpack.pack('c', 'fp', ARGV[1], ARGV[2]))",
    1,
    'record',
    '{"k":"j","s":201}',
    'x'.repeat(207),
  );
  await plain.set('small', 'x'.repeat(200));
  // The record key in place of its listing's: a replay never touches the index anyway.
  const claim = ['record', 'record', 'token', 'fp', '60000', '0', '', '', ''];
  const direct = new Redis(url);
  await direct.ping();
  const library = defineIdempotencyCommands(direct);
  const cases = {
    'GET, ioredis': () => plain.get('small'),
    'GET, ioredis auto-pipelining': () => pipelined.get('small'),
    'GET, node-redis': () => nodeRedis.get('small'),
    'EVALSHA claim, ioredis': () => plain.evalshaBuffer(sha, 2, ...claim),
    'EVALSHA claim, ioredis auto-pipelining': () => pipelined.evalshaBuffer(sha, 2, ...claim),
    'EVALSHA claim, this library (corked)': () => library.claim(...claim),
    'EVALSHA claim, node-redis': () =>
      nodeRedis.evalSha(sha, { keys: claim.slice(0, 2), arguments: claim.slice(2) }),
  };
  const samples = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, command] of Object.entries(cases))
      (samples[name] ??= []).push(await cpuPerCommand(command));
  }
  console.log(
    `Client CPU per command (µs), median of ${ROUNDS} rounds, ${CALLERS} concurrent callers:`,
  );
  for (const [name, values] of Object.entries(samples)) {
    const sorted = values.sort((a, b) => a - b);
    console.log(`  ${name.padEnd(40)} ${sorted[Math.floor(ROUNDS / 2)].toFixed(1).padStart(6)}`);
  }
  await Promise.all([pipelined.quit(), plain.quit(), direct.quit(), nodeRedis.quit()]);
  server.kill();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
