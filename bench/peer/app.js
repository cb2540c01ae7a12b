// The peer under test: @node-idempotency/nestjs with its Redis storage adapter on its own
// NestJS 10 (bench/peer has its own package.json and lockfile; bench/run.js installs it on first
// use), or with PEER_DIR=bench/peer11 on NestJS 11 (the same peer, its peer range overridden).
// Same routes and bodies as bench/apps/http.js, minus the no-op and wait-mode routes (the peer
// answers duplicates in progress with 409 only). Env: REDIS_URL, KEY_PREFIX, PEER_DIR. Prints
// `READY <port> <control port>`.
const { createRequire } = require('node:module');
const { join } = require('node:path');

const load = createRequire(join(process.env.PEER_DIR ?? __dirname, 'package.json'));
load('reflect-metadata');
const { Body, Controller, Headers, Module, Post } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { Idempotent, NodeIdempotencyModule } = load('@node-idempotency/nestjs');
const { executed, ready, decorate } = require('../apps/common');
const { orders, payment } = require('../payload');
const holds = require('../holds');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const respond = (body) => (executed(), body.size ? orders(body.size) : payment(body.amount));

class PeerController {
  baseline(body) {
    return respond(body);
  }
  async baselineIo(body) {
    await sleep(5);
    return respond(body);
  }
  idempotent(body) {
    return respond(body);
  }
  async idempotentIo(body) {
    await sleep(5);
    return respond(body);
  }
  hold(key) {
    return holds.hold(key);
  }
}
const routes = [
  ['baseline', 'baseline', []],
  ['baselineIo', 'baseline-io', []],
  ['idempotent', 'idempotent', [Idempotent()]],
  ['idempotentIo', 'idempotent-io', [Idempotent()]],
  ['hold', 'hold', [Idempotent()], Headers('idempotency-key')],
];
for (const [name, path, decorators, param = Body()] of routes) {
  decorate(PeerController, name, [Post(path), ...decorators], [param]);
}
Controller()(PeerController);

class AppModule {}
Module({
  imports: [
    // The adapter's options are node-redis `createClient` options; the prefix is core's option.
    NodeIdempotencyModule.forRootAsync({
      storage: { adapter: 'redis', options: { url: process.env.REDIS_URL } },
      cacheKeyPrefix: process.env.KEY_PREFIX ?? 'peer',
    }),
  ],
  controllers: [PeerController],
})(AppModule);

(async () => {
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  await ready(app.getHttpServer().address().port);
})();
