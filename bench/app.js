// The app under test, in its own process, using the built library (dist/) as users do.
// Env: STORE=redis|memory|postgres, REDIS_URL, KEY_PREFIX, POSTGRES_URL, POSTGRES_TABLE, PORT
// (0 = free; workers of bench/cluster.js share one), LIBRARY, BENCH_MODULE_OPTIONS
// (JSON merged into forRoot's options). Prints `READY <port>`.
// Routes (all POST): /baseline (no idempotency) and /idempotent, each also as /…-io with ~5 ms of
// simulated I/O, answering the ~200 B JSON of bench/payload.js (or `size` bytes of order JSON when
// the body asks for it); /hold (409 on a duplicate) and /hold-wait (onConflict: 'wait') hold until
// /control/release; /control/held answers once a handler holds the key. bench/peer/app.js serves
// the same routes with @node-idempotency/nestjs on NestJS 10.
// LIBRARY: the built library to load (default ../dist). NestJS is loaded from where the library
// resolves it, so bench/run.js runs a copy of dist/ inside bench/peer on the peer's NestJS 10.
const { createRequire } = require('node:module');
const { join, resolve } = require('node:path');
const LIBRARY = resolve(process.env.LIBRARY ?? join(__dirname, '..', 'dist'));
const load = createRequire(join(LIBRARY, 'index.js'));
load('reflect-metadata');
const { Body, Controller, Headers, Module, Post, UseInterceptors } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { Idempotent, IdempotencyModule, MemoryIdempotencyStore } = load(LIBRARY);
const { orders, payment } = require('./payload');
const holds = require('./holds');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const respond = (body) => (body.size ? orders(body.size) : payment(body.amount));

// A route whose decorator throws (say, an option this build does not know) is left out, and the
// bench reports the scenario as not available.
const missing = [];
let waitDecorator;
try {
  waitDecorator = Idempotent({ onConflict: 'wait', waitTimeout: 10_000 });
} catch (error) {
  missing.push(`hold-wait: ${error.message}`);
}

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
    BenchController.prototype,
    name,
    Object.getOwnPropertyDescriptor(BenchController.prototype, name),
  );
route('baseline', 'baseline', []);
route('baselineIo', 'baseline-io', []);
// The floor of any interceptor-based library: Nest's interceptor pipeline around the same handler.
class NoopInterceptor {
  intercept(context, next) {
    return next.handle();
  }
}
route('intercepted', 'intercepted', [UseInterceptors(NoopInterceptor)]);
route('interceptedIo', 'intercepted-io', [UseInterceptors(NoopInterceptor)]);
route('idempotent', 'idempotent', [Idempotent()]);
route('idempotentIo', 'idempotent-io', [Idempotent()]);
route('hold', 'hold', [Idempotent()], Headers('idempotency-key'));
if (waitDecorator) route('holdWait', 'hold-wait', [waitDecorator], Headers('idempotency-key'));
route('release', 'control/release', []);
route('held', 'control/held', []);
Controller()(BenchController);

const STORES = {
  redis: () => ({ redis: process.env.REDIS_URL, keyPrefix: process.env.KEY_PREFIX }),
  memory: () => ({ store: new MemoryIdempotencyStore({ maxEntries: 5_000_000 }) }),
  postgres: () => ({
    postgres: {
      connectionString: process.env.POSTGRES_URL,
      table: process.env.POSTGRES_TABLE,
      ensureSchema: true,
    },
  }),
};

class AppModule {}
Module({
  imports: [
    IdempotencyModule.forRoot({
      ...STORES[process.env.STORE](),
      // BENCH_MODULE_OPTIONS='{"metrics":false}' and the like, to see what an option costs.
      ...JSON.parse(process.env.BENCH_MODULE_OPTIONS || '{}'),
    }),
  ],
  controllers: [BenchController],
})(AppModule);

(async () => {
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  for (const line of missing) process.stdout.write(`MISSING ${line}\n`);
  process.stdout.write(`READY ${app.getHttpServer().address().port}\n`);
})();
