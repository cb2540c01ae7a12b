// The run() lane under test: IdempotencyService.run() in a Nest application context (no
// transport: a job worker's shape), driven in process by apps/run-loop.js through the control
// server. Env: see apps/common.js; with VARIANT steps the function is resumable and does its work
// in STEPS (3) steps of IdempotencyService.step(), the plain lane the same functions called
// directly. Prints `READY 0 <control port>`.
const { load, LIBRARY, executed, moduleOptions, ready, variants } = require('./common');
load('reflect-metadata');
const { Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { IdempotencyModule, IdempotencyService } = load(LIBRARY);
const { payment } = require('../payload');
const holds = require('../holds');
const { runnerRoutes } = require('./run-loop');

class AppModule {}
Module({ imports: [IdempotencyModule.forRoot(moduleOptions())] })(AppModule);

const STEPS = variants().has('steps') ? 3 : 0;
const work = (amount) => (executed(), payment(amount));
const part = (i) => ({ part: i });

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
  const service = app.get(IdempotencyService);
  // run()'s defaults, as Powertools' lanes run with theirs: no fingerprint (the 422 lane sets
  // one, its payload's amount), and a duplicate in progress waits (the 409 lane asks to refuse).
  const steps = async (amount, step) => {
    for (let i = 0; i < STEPS; i++) await step(`part-${i}`, () => part(i));
    return work(amount);
  };
  const adapter = {
    plain: async (amount) => steps(amount, (name, fn) => fn()),
    keyed: (key, amount, { hold, reject, fingerprint }) =>
      service.run(
        key,
        () => (hold ? holds.hold(key) : steps(amount, (name, fn) => service.step(name, fn))),
        {
          scope: 'bench',
          ...(fingerprint && { fingerprint: { amount } }),
          ...(reject && { onConflict: 'reject' }),
          ...(STEPS && { resumable: true }),
        },
      ),
  };
  await ready(0, runnerRoutes(adapter));
}
main();
