// The run() lane under test: IdempotencyService.run() in a Nest application context (no
// transport: a job worker's shape), driven in process by apps/run-loop.js through the control
// server. Env: see apps/common.js. Prints `READY 0 <control port>`.
const { load, LIBRARY, executed, moduleOptions, ready } = require('./common');
load('reflect-metadata');
const { Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { IdempotencyModule, IdempotencyService } = load(LIBRARY);
const { payment } = require('../payload');
const holds = require('../holds');
const { runnerRoutes } = require('./run-loop');

class AppModule {}
Module({ imports: [IdempotencyModule.forRoot(moduleOptions())] })(AppModule);

const work = (amount) => (executed(), payment(amount));

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
  const service = app.get(IdempotencyService);
  // run()'s defaults, as Powertools' lanes run with theirs: no fingerprint (the 422 lane sets
  // one, its payload's amount), and a duplicate in progress waits (the 409 lane asks to refuse).
  const adapter = {
    plain: async (amount) => work(amount),
    keyed: (key, amount, { hold, reject, fingerprint }) =>
      service.run(key, () => (hold ? holds.hold(key) : work(amount)), {
        scope: 'bench',
        ...(fingerprint && { fingerprint: { amount } }),
        ...(reject && { onConflict: 'reject' }),
      }),
  };
  await ready(0, runnerRoutes(adapter));
}
main();
