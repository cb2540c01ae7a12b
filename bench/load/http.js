// The load generator, run as its own process by bench/run.js: autocannon with one config (JSON in
// argv[2]); `uniqueKey: true` gives every request a fresh Idempotency-Key. Prints the result JSON.
const autocannon = require('autocannon');
const { randomUUID } = require('node:crypto');

const { url, connections, duration, headers, body, uniqueKey } = JSON.parse(process.argv[2]);
autocannon(
  {
    url,
    connections,
    duration,
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
  (error, result) => {
    if (error) throw error;
    process.stdout.write(JSON.stringify(result));
  },
);
