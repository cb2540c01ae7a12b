// The floor's run() lane: bench/floor/floor.js's run(key, fn) on the lane's store (Redis, or
// floor-sql.js's PostgreSQL and MySQL), driven in process by bench/apps/run-loop.js through the
// control server, as bench/apps/runner.js drives IdempotencyService.run(). A duplicate in
// progress is refused (the floor never waits), and there is no fingerprint: no 422 lane. Env:
// STORE and its URL (see bench/floor/open.js). Prints `READY 0 <control port>`.
const { executed, ready } = require('../apps/common');
const { runnerRoutes } = require('../apps/run-loop');
const { payment } = require('../payload');
const holds = require('../holds');
const { openFloor } = require('./open');

openFloor().then((floor) => {
  const adapter = {
    plain: async (amount) => (executed(), payment(amount)),
    keyed: (key, amount, { hold }) =>
      floor.run(key, () => (hold ? holds.hold(key) : (executed(), payment(amount)))),
  };
  return ready(0, runnerRoutes(adapter));
});
