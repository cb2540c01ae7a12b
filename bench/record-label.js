// node bench/record-label.js (after npm run build): CPU µs per claim that labelling a record for
// listing adds (ClaimRequest.about: the client's key and owner, lib/core/record-label.ts), in
// this process: the label alone, plain and sealed with `encryption`; and a first execution of
// IdempotencyService.run() on the memory store, whose claims carry a label only when the store
// lists records, without and with `encryption`. Each round starts a fresh store (a store holding
// hundreds of thousands of records measures the garbage collector instead), rounds interleaved,
// medians of the paired differences. Env: ROUNDS (41), N claims per round (2000).
const { join } = require('node:path');
const dist = join(__dirname, '..', 'dist');
const { RecordLabels } = require(join(dist, 'core/record-label'));
const { recordKey, recordScope } = require(join(dist, 'core/record-key'));
const { RecordCipher } = require(join(dist, 'utils/encryption'));
const { IdempotencyService, MemoryIdempotencyStore } = require(dist);
const { resolveModuleOptions } = require(join(dist, 'options'));

const ROUNDS = Number(process.env.ROUNDS || 41);
const N = Number(process.env.N || 2000);
const SECRET = 'Zk3vQ9rT1xLw8pNc2yHs6bJd4mFa7gEu';
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
const cpu = (started) => {
  const used = process.cpuUsage(started);
  return (used.user + used.system) / N;
};

const ROUTE = 'POST /payments';
const SCOPE = recordScope(ROUTE, undefined, 'id=s:user-42');
const CLIENT_KEY = '8e0f3c9a-5b1d-4c7e-9f2a-6d3b1e8c4a70'; // a UUID, as most clients send
const claims = Array.from({ length: 1024 }, (_, i) => ({
  key: recordKey('idempotency:', SCOPE, `${CLIENT_KEY}${i}`),
  route: ROUTE,
  scope: SCOPE,
  clientKey: `${CLIENT_KEY}${i}`,
}));

function labelRound(labels) {
  const started = process.cpuUsage();
  for (let i = 0; i < N * 10; i++) labels.about(claims[i & 1023]);
  return cpu(started) / 10;
}

/** run() on a fresh memory store that lists records (its claims are labelled) or does not. */
function service(listing, options) {
  const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
  const list = listing ? async () => ({ items: [] }) : undefined;
  Object.defineProperty(store, 'list', { value: list });
  return new IdempotencyService(store, options);
}

let seq = 0;
async function runRound(listing, options) {
  const idempotency = service(listing, options);
  const started = process.cpuUsage();
  for (let i = 0; i < N; i++) await idempotency.run(`bench-${++seq}`, () => 1);
  return cpu(started);
}

/** Medians of a variant's rounds without and with labels, and of their paired differences. */
async function compare(options) {
  const without = [];
  const labelled = [];
  for (let r = 0; r < 6; r++) (await runRound(false, options), await runRound(true, options));
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2)
      (labelled.push(await runRound(true, options)), without.push(await runRound(false, options)));
    else
      (without.push(await runRound(false, options)), labelled.push(await runRound(true, options)));
  }
  const diff = median(without.map((value, i) => labelled[i] - value));
  return `${median(without).toFixed(2)} µs unlabelled, ${median(labelled).toFixed(2)} µs labelled (paired difference ${diff >= 0 ? '+' : ''}${diff.toFixed(2)} µs)`;
}

(async () => {
  const plain = new RecordLabels();
  const sealed = new RecordLabels(new RecordCipher({ keys: [SECRET] }));
  const label = { plain: [], sealed: [] };
  (labelRound(plain), labelRound(sealed)); // warm-up
  for (let r = 0; r < 7; r++) {
    label.plain.push(labelRound(plain));
    label.sealed.push(labelRound(sealed));
  }
  console.log(
    `label per claim: ${median(label.plain).toFixed(2)} µs plain, ` +
      `${median(label.sealed).toFixed(2)} µs sealed (${plain.about(claims[0]).label.length} and ` +
      `${sealed.about(claims[0]).label.length} characters)`,
  );
  const base = { allowInMemoryStorage: true, metrics: false };
  console.log(`run() first execution, memory store: ${await compare(resolveModuleOptions(base))}`);
  const encrypted = resolveModuleOptions({ ...base, encryption: { keys: [SECRET] } });
  console.log(`run() first execution, memory store, encryption: ${await compare(encrypted)}`);
  process.exit(0);
})();
