// The floor's run() lane: bench/floor/floor.js's run(key, fn) on the root's ioredis, driven in
// process by bench/apps/run-loop.js through the control server, as bench/apps/runner.js drives
// IdempotencyService.run(). A duplicate in progress is refused (the floor never waits), and
// there is no fingerprint: no 422 lane. Env: REDIS_URL, KEY_PREFIX. Prints `READY 0 <control
// port>`.
const Redis = require('ioredis').default;
const { countStoreCalls, executed, ready } = require('../apps/common');
const { runnerRoutes } = require('../apps/run-loop');
const { payment } = require('../payload');
const holds = require('../holds');
const { createFloor } = require('./floor');

countStoreCalls('redis');
const floor = createFloor(new Redis(process.env.REDIS_URL), { prefix: process.env.KEY_PREFIX });

const adapter = {
  plain: async (amount) => (executed(), payment(amount)),
  keyed: (key, amount, { hold }) =>
    floor.run(key, () => (hold ? holds.hold(key) : (executed(), payment(amount)))),
};
ready(0, runnerRoutes(adapter));
