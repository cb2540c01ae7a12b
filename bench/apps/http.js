// The HTTP app under test: this library on Express or Fastify (ADAPTER), in its own process,
// the built library loaded as users load it. Env: see apps/common.js; ADAPTER (express|fastify),
// PORT (0 = free; workers of bench/cluster.js share one). Prints `READY <port> <control port>`.
// Routes (all POST): /baseline (no idempotency: the plain lane), /intercepted (the same behind a
// no-op interceptor: Nest's interceptor pipeline alone) and /idempotent, each also as /…-io with
// ~5 ms of simulated I/O, answering the ~200 B JSON of bench/payload.js (or `size` bytes of
// order JSON when the body asks for it); /hold (409 on a duplicate) and /hold-wait
// (onConflict: 'wait') run until the control server releases their key.
// LIBRARY: NestJS is loaded from where the library resolves it, so bench/run.js runs a copy of
// dist/ inside bench/peer on the peer's NestJS 10.
const { load, LIBRARY, executed, moduleOptions, ready, decorate } = require('./common');
load('reflect-metadata');
const { Body, Controller, Headers, Module, Post, UseInterceptors } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { Idempotent, IdempotencyModule } = load(LIBRARY);
const { orders, payment } = require('../payload');
const holds = require('../holds');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const respond = (body) => (executed(), body.size ? orders(body.size) : payment(body.amount));

class BenchController {
  baseline(body) {
    return respond(body);
  }
  async baselineIo(body) {
    await sleep(5);
    return respond(body);
  }
  intercepted(body) {
    return respond(body);
  }
  async interceptedIo(body) {
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
  holdWait(key) {
    return holds.hold(key);
  }
}
// The floor of any interceptor-based library: Nest's interceptor pipeline around the same handler.
class NoopInterceptor {
  intercept(context, next) {
    return next.handle();
  }
}
const routes = [
  ['baseline', 'baseline', []],
  ['baselineIo', 'baseline-io', []],
  ['intercepted', 'intercepted', [UseInterceptors(NoopInterceptor)]],
  ['interceptedIo', 'intercepted-io', [UseInterceptors(NoopInterceptor)]],
  ['idempotent', 'idempotent', [Idempotent()]],
  ['idempotentIo', 'idempotent-io', [Idempotent()]],
  ['hold', 'hold', [Idempotent()], Headers('idempotency-key')],
  [
    'holdWait',
    'hold-wait',
    [Idempotent({ onConflict: 'wait', waitTimeout: 10_000 })],
    Headers('idempotency-key'),
  ],
];
for (const [name, path, decorators, param = Body()] of routes) {
  decorate(BenchController, name, [Post(path), ...decorators], [param]);
}
Controller()(BenchController);

class AppModule {}
Module({
  imports: [IdempotencyModule.forRoot(moduleOptions())],
  controllers: [BenchController],
})(AppModule);

async function main() {
  let app;
  if (process.env.ADAPTER === 'fastify') {
    const { FastifyAdapter } = load('@nestjs/platform-fastify');
    app = await NestFactory.create(AppModule, new FastifyAdapter(), { logger: ['error'] });
  } else {
    app = await NestFactory.create(AppModule, { logger: ['error'] });
  }
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  await ready(app.getHttpServer().address().port);
}
main();
