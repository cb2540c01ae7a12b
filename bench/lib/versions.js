// What ran: Node, the servers, NestJS, the peers, and the commit (with a flag for uncommitted
// library changes, since a working tree may change while it is measured).
const { spawnSync } = require('node:child_process');
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

const BENCH = join(__dirname, '..');
const read = (path) =>
  existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')).version : undefined;
const git = (args) => spawnSync('git', args, { cwd: BENCH, encoding: 'utf8' }).stdout.trim();

function versions(servers) {
  return {
    node: process.version,
    ...servers,
    nestjs: read(require.resolve('@nestjs/core/package.json')),
    nodeIdempotency: read(join(BENCH, 'peer/node_modules/@node-idempotency/nestjs/package.json')),
    peerNestjs: read(join(BENCH, 'peer/node_modules/@nestjs/core/package.json')),
    peer11Nestjs: read(join(BENCH, 'peer11/node_modules/@nestjs/core/package.json')),
    nestarc: read(join(BENCH, 'nestarc/dist/package.json')),
    powertools: read(
      join(BENCH, 'powertools/node_modules/@aws-lambda-powertools/idempotency/package.json'),
    ),
    autocannon: read(require.resolve('autocannon/package.json')),
    commit: git(['rev-parse', '--short', 'HEAD']),
    libraryChangesUncommitted:
      git(['status', '--porcelain', '--', '../lib', '../lua', '../sql']) !== '',
  };
}

module.exports = { versions };
