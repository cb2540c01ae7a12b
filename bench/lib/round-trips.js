// Redis commands per request, for this library and its Redis peers alike: MONITOR on the
// private redis-server while one lane sends its requests one after the other, counting commands
// sent by clients (commands run inside a Lua script are no round trip and are left out).
const { RT_REQUESTS } = require('./config');
const { load } = require('./scenarios');
const { round, sum } = require('./stats');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const SCENARIOS = ['first', 'replay', 'conflict', 'mismatch'];

async function counted(monitor, action) {
  const seen = {};
  const count = (time, args, source) => {
    if (source === 'lua') return;
    const name = String(args[0]).toLowerCase();
    seen[name] = (seen[name] ?? 0) + 1;
  };
  monitor.on('monitor', count);
  const requests = await action();
  await sleep(200); // MONITOR lines arrive after the replies
  monitor.off('monitor', count);
  return {
    total: round(sum(Object.values(seen)) / requests, 2),
    commands: Object.fromEntries(
      Object.entries(seen).map(([name, n]) => [name, round(n / requests, 2)]),
    ),
  };
}

/** { lane id: { scenario: { total, commands } } } for the measurements of lanes with roundTrips. */
async function redisRoundTrips(redis, measurements) {
  const monitor = await redis.monitor();
  const result = {};
  try {
    for (const m of measurements) {
      if (
        !m.lane.roundTrips ||
        m.lane.store !== 'redis' ||
        !SCENARIOS.includes(m.scenario) ||
        m.skipped
      )
        continue;
      const trips = await counted(monitor, async () => {
        const answer = await load(m.app, m.scenario, m.key, { count: RT_REQUESTS });
        return answer.requests;
      });
      (result[m.lane.id] ??= {})[m.scenario] = trips;
    }
  } finally {
    monitor.disconnect();
  }
  return result;
}

module.exports = { redisRoundTrips };
