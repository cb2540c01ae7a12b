// The WebSocket gateway load generator: socket.io clients (the websocket transport, one socket
// per caller), each event sent with `emitWithAck`, the key in the message's `idempotencyKey`.
// A refusal arrives as the ack `{ status: 'error', code, message }`: counted under its code.
// spec: { url, event, data, key | uniqueKey, connections, duration (s) | count }. `probe` sends
// one event and says how it went. Forked by bench/run.js (see load/worker.js).
const { randomUUID } = require('node:crypto');
const { io } = require('socket.io-client');
const { serve, closedLoop } = require('./worker');

/** Connected sockets per URL, kept for the whole run. */
const pools = new Map();
async function sockets(url, count) {
  const pool = pools.get(url) ?? [];
  pools.set(url, pool);
  while (pool.length < count) {
    const socket = io(url, { transports: ['websocket'], forceNew: true });
    await new Promise((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('connect_error', reject);
    });
    pool.push(socket);
  }
  return pool;
}

async function send(socket, { event, data }, key) {
  const answer = await socket
    .timeout(30_000)
    .emitWithAck(event, key ? { ...data, idempotencyKey: key } : data);
  if (answer?.status === 'error') {
    throw Object.assign(new Error(answer.message), { code: answer.code ?? 'WsError' });
  }
  return answer;
}

serve({
  measure: async (spec) => {
    const pool = await sockets(spec.url, spec.connections);
    return closedLoop(
      (i) => send(pool[i % pool.length], spec, spec.uniqueKey ? randomUUID() : spec.key),
      spec,
    );
  },
  probe: async (spec) => {
    const [socket] = await sockets(spec.url, 1);
    try {
      return { ok: true, value: await send(socket, spec, spec.key) };
    } catch (error) {
      return { ok: false, error: `${error.code} ${error.message}` };
    }
  },
});
