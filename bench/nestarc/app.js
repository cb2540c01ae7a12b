// The peer @nestarc/idempotency (built by bench/nestarc/build.js) with its Redis storage on
// NestJS 11 and Express, the root's, as this library runs: its interceptor bound per route with
// @UseInterceptors, as its README shows. Same routes and bodies as bench/apps/http.js, minus the
// no-op and wait-mode routes. Env: REDIS_URL, KEY_PREFIX. Its Redis client is ioredis 5 (its
// supported major; the root's `ioredis5`). Prints `READY <port> <control port>`.
const { join } = require('node:path');
require('reflect-metadata');
const { Body, Controller, Headers, Module, Post, UseInterceptors } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const Redis = require('ioredis5');
const nestarc = require(join(__dirname, 'dist'));
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
const idempotent = [UseInterceptors(nestarc.IdempotencyInterceptor), nestarc.Idempotent()];
const routes = [
  ['baseline', 'baseline', []],
  ['baselineIo', 'baseline-io', []],
  ['idempotent', 'idempotent', idempotent],
  ['idempotentIo', 'idempotent-io', idempotent],
  ['hold', 'hold', idempotent, Headers('idempotency-key')],
];
for (const [name, path, decorators, param = Body()] of routes) {
  decorate(PeerController, name, [Post(path), ...decorators], [param]);
}
Controller()(PeerController);

class AppModule {}
Module({
  imports: [
    nestarc.IdempotencyModule.forRoot({
      storage: new nestarc.RedisStorage({
        client: new Redis(process.env.REDIS_URL),
        keyPrefix: process.env.KEY_PREFIX ?? 'nestarc:',
      }),
      ttl: 86_400,
    }),
  ],
  controllers: [PeerController],
})(AppModule);

(async () => {
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  await ready(app.getHttpServer().address().port);
})();
