// Wait-mode latency (@Idempotent({ onConflict: 'wait' })): per key, a holder enters POST
// /hold-wait and holds; WAITERS duplicates are sent, and after WAIT_SETTLE_MS the holder is
// released. Reported: from the holder's handler completing (its own high-resolution wall clock)
// to each waiter having the replayed response, over WAIT_KEYS keys.
const { WAIT_KEYS, WAITERS, WAIT_SETTLE_MS } = require('./config');
const { control, post } = require('./apps');
const { percentiles } = require('./stats');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitLatency(app) {
  const id = `${app.lane.id}-${Date.now()}`;
  const delays = [];
  const holderDelays = [];
  const other = {};
  const send = (key) => post(`${app.base}/hold-wait`, {}, { 'idempotency-key': key });
  for (let i = 0; i < WAIT_KEYS; i++) {
    const key = `wait-${id}-${i}`;
    const holder = send(key);
    await control(app, '/held', { key });
    const waiters = Array.from({ length: WAITERS }, () => send(key));
    await sleep(WAIT_SETTLE_MS); // let every duplicate reach the server and start waiting
    await control(app, '/release', { key });
    const [first, ...rest] = await Promise.all([holder, ...waiters]);
    const { completedAt } = JSON.parse(first.body);
    holderDelays.push(first.receivedAt - completedAt);
    for (const response of rest) {
      if (response.status < 300 && response.headers['idempotent-replayed'])
        delays.push(response.receivedAt - completedAt);
      else other[response.status] = (other[response.status] ?? 0) + 1;
    }
    if (i === 0 && delays.length === 0) {
      return {
        available: false,
        reason: `duplicates answered ${Object.keys(other).join(', ')} instead of waiting`,
      };
    }
  }
  return {
    available: true,
    keys: WAIT_KEYS,
    waitersPerKey: WAITERS,
    replayed: delays.length,
    notReplayed: other,
    ms: percentiles(delays),
    holderOwnMs: percentiles(holderDelays),
  };
}

module.exports = { waitLatency };
