// The HTTP load generator (autocannon) for the HTTP and GraphQL lanes. spec: { url, connections,
// duration (s) | amount, headers, body, uniqueKey } (`uniqueKey: true` gives every request a fresh
// Idempotency-Key). Forked by bench/run.js (see load/worker.js); with a JSON spec in argv[2] it
// runs once and prints autocannon's result (bench/scale.js, bench/compare.js).
const autocannon = require('autocannon');
const { randomUUID } = require('node:crypto');

function run({ url, connections, duration, amount, headers = {}, body, uniqueKey }) {
  return new Promise((resolve, reject) =>
    autocannon(
      {
        url,
        connections,
        ...(amount ? { amount } : { duration }),
        // autocannon stops at its next sample: every second by default, which rounds 1.5 s up
        // to 2 s. Every 100 ms, it stops within 0.1 s of `duration`.
        sampleInt: 100,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
        requests: uniqueKey
          ? [
              {
                setupRequest: (request) => ({
                  ...request,
                  headers: { ...request.headers, 'idempotency-key': randomUUID() },
                }),
              },
            ]
          : undefined,
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    ),
  );
}

async function measure(spec) {
  const result = await run(spec);
  const total = result.requests.total;
  return {
    requests: total,
    rps: total / (result.duration || spec.duration),
    ok: total - result.non2xx,
    errors: {
      ...(result.non2xx && { non2xx: result.non2xx }),
      ...(result.errors && { socket: result.errors }),
      ...(result.timeouts && { timeouts: result.timeouts }),
    },
    latency: { p50: result.latency.p50, p99: result.latency.p99 },
  };
}

if (process.argv[2]) {
  run(JSON.parse(process.argv[2])).then((result) => process.stdout.write(JSON.stringify(result)));
} else {
  require('./worker').serve({ measure });
}
