// The gRPC load generator: unary calls of bench/apps/bench.proto from `connections` concurrent
// callers over one HTTP/2 connection, the key in `idempotency-key` metadata. It speaks gRPC over
// node:http2 itself (a 5-byte frame around a hand-encoded request; success is grpc-status 0):
// @grpc/grpc-js's client cost the loader several times the server's CPU per call, so on two
// cores the loader, not the app, set the pace. spec: { address, method, request, key |
// uniqueKey, connections, duration (s) | count }. `probe` makes one call and says how it went.
// Forked by bench/run.js (see load/worker.js).
const http2 = require('node:http2');
const { randomUUID } = require('node:crypto');
const { serve, closedLoop } = require('./worker');

const sessions = new Map();
function session(address) {
  let s = sessions.get(address);
  if (!s || s.closed || s.destroyed) {
    s = http2.connect(`http://${address}`);
    s.on('error', () => sessions.delete(address));
    sessions.set(address, s);
  }
  return s;
}

const varint = (n) => {
  const bytes = [];
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  bytes.push(n);
  return bytes;
};

/** PayRequest { int32 amount = 1 } or HoldRequest { string key = 1 }, in a gRPC frame. */
function frame(request) {
  const body =
    request.key !== undefined
      ? Buffer.from([0x0a, ...varint(Buffer.byteLength(request.key)), ...Buffer.from(request.key)])
      : Buffer.from([0x08, ...varint(request.amount)]);
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

function call({ address, method, request }, key) {
  return new Promise((resolve, reject) => {
    const stream = session(address).request({
      ':method': 'POST',
      ':path': `/bench.Bench/${method}`,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...(key && { 'idempotency-key': key }),
    });
    let status;
    let message = '';
    const settle = (headers) => {
      if (headers['grpc-status'] !== undefined) status = Number(headers['grpc-status']);
      if (headers['grpc-message']) message = decodeURIComponent(headers['grpc-message']);
    };
    stream.on('response', settle);
    stream.on('trailers', settle);
    stream.on('data', () => {});
    stream.on('error', reject);
    stream.on('close', () => {
      if (status === 0) resolve();
      else
        reject(Object.assign(new Error(message || 'no grpc-status'), { code: status ?? 'closed' }));
    });
    stream.end(frame(request));
  });
}

serve({
  measure: (spec) => closedLoop(() => call(spec, spec.uniqueKey ? randomUUID() : spec.key), spec),
  probe: async (spec) => {
    try {
      await call(spec, spec.key);
      return { ok: true };
    } catch (error) {
      return { ok: false, error: `${error.code} ${error.message}` };
    }
  },
});
