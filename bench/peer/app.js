// The peer under test: @node-idempotency/nestjs with its Redis storage adapter on its own
// NestJS 10 (bench/peer has its own package.json and lockfile; run.js installs it on first use).
// Same routes and bodies as bench/app.js, minus /hold-wait (the peer answers duplicates in
// progress with 409 only). Env: REDIS_URL, KEY_PREFIX, PORT (0 = free). Prints `READY <port>`.
require('reflect-metadata');
const { Body, Controller, Headers, Module, Post } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Idempotent, NodeIdempotencyModule } = require('@node-idempotency/nestjs');
const { orders, payment } = require('../payload');
const holds = require('../holds');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const respond = (body) => (body.size ? orders(body.size) : payment(body.amount));

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
  release(body) {
    return { released: holds.release(body.key) };
  }
  async held(body) {
    return { held: await holds.whenHeld(body.key) };
  }
}
const route = (name, path, decorators, param = Body()) =>
  Reflect.decorate(
    [Post(path), ...decorators, (t, k, d) => (param(t, k, 0), d)],
    PeerController.prototype,
    name,
    Object.getOwnPropertyDescriptor(PeerController.prototype, name),
  );
route('baseline', 'baseline', []);
route('baselineIo', 'baseline-io', []);
route('idempotent', 'idempotent', [Idempotent()]);
route('idempotentIo', 'idempotent-io', [Idempotent()]);
route('hold', 'hold', [Idempotent()], Headers('idempotency-key'));
route('release', 'control/release', []);
route('held', 'control/held', []);
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
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  process.stdout.write(`READY ${app.getHttpServer().address().port}\n`);
})();
