// The floor's HTTP lane: bench/floor/interceptor.js on the root's NestJS 11 and Express, as this
// library's HTTP lane runs, with the same routes and bodies as bench/apps/http.js (minus the
// no-op and wait-mode routes), and /fail (a handler that throws: the floor's release, for
// floor.test.js). Env: STORE and its URL (see bench/floor/open.js). Prints `READY <port> <control
// port>`.
require('reflect-metadata');
const {
  Body,
  Controller,
  Headers,
  Module,
  Post,
  ServiceUnavailableException,
  UseInterceptors,
} = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { executed, ready, decorate } = require('../apps/common');
const { orders, payment } = require('../payload');
const holds = require('../holds');
const { FloorInterceptor } = require('./interceptor');
const { openFloor } = require('./open');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const respond = (body) => (executed(), body.size ? orders(body.size) : payment(body.amount));

class FloorController {
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
  fail() {
    executed();
    throw new ServiceUnavailableException('the handler failed');
  }
}
// Its floor is set once the store is open (SQL: its table created), before the app listens.
const interceptor = new FloorInterceptor(undefined);
const idempotent = [UseInterceptors(interceptor)];
const routes = [
  ['baseline', 'baseline', []],
  ['baselineIo', 'baseline-io', []],
  ['idempotent', 'idempotent', idempotent],
  ['idempotentIo', 'idempotent-io', idempotent],
  ['hold', 'hold', idempotent, Headers('idempotency-key')],
  ['fail', 'fail', idempotent],
];
for (const [name, path, decorators, param = Body()] of routes) {
  decorate(FloorController, name, [Post(path), ...decorators], [param]);
}
Controller()(FloorController);

class AppModule {}
Module({ controllers: [FloorController] })(AppModule);

(async () => {
  interceptor.floor = await openFloor();
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  await ready(app.getHttpServer().address().port);
})();
