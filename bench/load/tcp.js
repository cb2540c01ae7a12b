// The TCP message load generator: Nest's own TCP client (ClientProxy) from `connections`
// concurrent callers, the key in the payload's `idempotencyKey`. spec: { port, pattern, data,
// key | uniqueKey, connections, duration (s) | count }. `probe` sends one message and says how it
// went. Forked by bench/run.js (see load/worker.js).
const { randomUUID } = require('node:crypto');
const { lastValueFrom } = require('rxjs');
const { ClientProxyFactory, Transport } = require('@nestjs/microservices');
const { serve, closedLoop } = require('./worker');

const clients = new Map();
async function client(port) {
  if (!clients.has(port)) {
    const proxy = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    await proxy.connect();
    // Nagle's algorithm off on the client's socket (Nest leaves it on): otherwise a request
    // written while an earlier one is unanswered waits for its ACK, and the delayed-ACK timer
    // (40 ms) rather than the app sets the pace.
    if (process.env.TCP_NODELAY !== '0') proxy.socket?.netSocket?.setNoDelay(true);
    clients.set(port, proxy);
  }
  return clients.get(port);
}

async function send({ port, pattern, data }, key) {
  const proxy = await client(port);
  try {
    return await lastValueFrom(proxy.send(pattern, key ? { ...data, idempotencyKey: key } : data));
  } catch (error) {
    // An RpcException arrives as its plain error object: named by its code for the counts.
    throw Object.assign(new Error(error?.message ?? String(error)), {
      code: error?.code ?? 'RpcError',
    });
  }
}

serve({
  measure: (spec) => closedLoop(() => send(spec, spec.uniqueKey ? randomUUID() : spec.key), spec),
  probe: async (spec) => {
    try {
      return { ok: true, value: await send(spec, spec.key) };
    } catch (error) {
      return { ok: false, error: `${error.code} ${error.message}` };
    }
  },
});
