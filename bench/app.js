// The app under test, in its own process, using the built library (dist/) as users do.
// Env: STORE=redis|memory, REDIS_URL, KEY_PREFIX, PORT (0 = free). Prints `READY <port>`.
// Routes: POST /baseline (no idempotency), POST /idempotent, each also as /…-io with ~5 ms of
// simulated I/O; POST /hold waits x-delay-ms (for the conflict scenario); the handlers return
// a ~200 B JSON body, or `size` bytes of padding when the body asks for it.
require('reflect-metadata');
const { Body, Controller, Headers, Module, Post } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Idempotent, IdempotencyModule, MemoryIdempotencyStore } = require('../dist');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const respond = (body) => ({
  id: 'pay_01HZX5K8G7Q2',
  status: 'succeeded',
  amount: body.amount ?? 100,
  currency: 'EUR',
  created: 1763800000,
  description: 'Order #1234 from the benchmark',
  padding: body.size ? 'x'.repeat(body.size) : undefined,
});

class BenchController {
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
  async hold(delay) {
    await sleep(Number(delay) || 0);
    return { held: true };
  }
}
const route = (name, path, idempotent, param = Body()) =>
  Reflect.decorate(
    [Post(path), ...(idempotent ? [Idempotent()] : []), (t, k, d) => (param(t, k, 0), d)],
    BenchController.prototype,
    name,
    Object.getOwnPropertyDescriptor(BenchController.prototype, name),
  );
route('baseline', 'baseline', false);
route('baselineIo', 'baseline-io', false);
route('idempotent', 'idempotent', true);
route('idempotentIo', 'idempotent-io', true);
route('hold', 'hold', true, Headers('x-delay-ms'));
Controller()(BenchController);

class AppModule {}
Module({
  imports: [
    IdempotencyModule.forRoot(
      process.env.STORE === 'redis'
        ? { redis: process.env.REDIS_URL, keyPrefix: process.env.KEY_PREFIX }
        : { store: new MemoryIdempotencyStore({ maxEntries: 5_000_000 }) },
    ),
  ],
  controllers: [BenchController],
})(AppModule);

(async () => {
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  process.stdout.write(`READY ${app.getHttpServer().address().port}\n`);
})();
