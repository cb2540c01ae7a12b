// The peer of run(): AWS Powertools' makeIdempotent with its Redis persistence layer
// (CachePersistenceLayer on @redis/client), driven in process by bench/apps/run-loop.js through
// the control server, as bench/apps/runner.js drives run(). bench/powertools has its own
// package.json and lockfile (bench/run.js runs `npm ci --prefix bench/powertools` on first use).
// Env: REDIS_URL, KEY_PREFIX, LOCAL_CACHE=1 (its in-process cache of completed records, off by
// default as in Powertools). Prints `READY 0 <control port>`.
const { createClient } = require('@redis/client');
const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
const { CachePersistenceLayer } = require('@aws-lambda-powertools/idempotency/cache');
const { executed, ready } = require('../apps/common');
const { runnerRoutes } = require('../apps/run-loop');
const { payment } = require('../payload');
const holds = require('../holds');

async function main() {
  const client = createClient({ url: process.env.REDIS_URL });
  await client.connect();
  const persistenceStore = new CachePersistenceLayer({ client });
  // The key from the event's `key`, as run() is called with a key. No payload validation: with
  // this persistence layer (2.35) a completed record loses the payload's hash, so every replay
  // fails validation; the 422 scenario is left out of its lanes.
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'key',
    expiresAfterSeconds: 86_400,
    useLocalCache: process.env.LOCAL_CACHE === '1',
    maxLocalCacheSize: 1_000,
  });
  // Outside Lambda there is no remaining time: the in-progress lease is what remains of this
  // fake invocation, 30 s, as run()'s default lockTtl.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 30_000 });
  const idempotent = makeIdempotent(
    async (event) => (event.hold ? holds.hold(event.key) : (executed(), payment(event.amount))),
    { persistenceStore, config, keyPrefix: process.env.KEY_PREFIX ?? 'powertools' },
  );
  const adapter = {
    plain: async (amount) => (executed(), payment(amount)),
    // Powertools refuses a key in progress at once (IdempotencyAlreadyInProgressError): no wait.
    keyed: (key, amount, { hold }) => idempotent({ key, amount, ...(hold && { hold: true }) }),
  };
  await ready(0, runnerRoutes(adapter));
}
main();
