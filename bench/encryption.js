// node bench/encryption.js (after npm run build): CPU µs per request that `encryption` adds, in
// this process: the codec's store path (encode, pack, seal) and replay path (open, decode) of a
// typical response, with and without sealing. Interleaved rounds, medians; the app-level lanes
// (`STORE=memory|redis node bench/compare.js` with `#{"encryption":...}`) are too noisy on a
// shared machine to show a difference this small. Env: ROUNDS (7), N requests per round (20000).
const { join } = require('node:path');
const dist = join(__dirname, '..', 'dist');
const codec = require(join(dist, 'utils/response-codec'));
const { RecordCipher } = require(join(dist, 'utils/encryption'));

const ROUNDS = Number(process.env.ROUNDS || 7);
const N = Number(process.env.N || 20_000);
const cipher = new RecordCipher({ keys: ['bench-secret-of-at-least-thirty-two-characters'] });
const BODIES = {
  // About 300 bytes of JSON, as a payment API answers; and about 8 KiB (compressed first).
  small: {
    id: 'pay_8f3a2c',
    amount: 4200,
    currency: 'EUR',
    status: 'succeeded',
    card: { brand: 'visa', last4: '4242', exp: '12/29' },
    customer: { id: 'cus_91', email: 'jane@example.com' },
    createdAt: '2026-11-25T19:00:00.000Z',
  },
  large: Array.from({ length: 60 }, (_, i) => ({
    id: `ord_${i}`,
    sku: `SKU-${i % 7}`,
    qty: i % 5,
    price: (i * 37) % 1000,
    note: 'x'.repeat(60),
  })),
};
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];

async function run(value, sealing) {
  const snapshot = { status: 201, headers: { location: '/payments/1' }, value };
  const compression = { algorithm: 'brotli', threshold: 1024 };
  const started = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const context = sealing && { cipher, context: `idempotency:k${i}` };
    let stored = codec.packResponse(codec.encodeResponse(snapshot), compression, context);
    if (stored.then) stored = await stored;
    let replay = codec.decodeResponse(stored, context);
    if (replay.then) replay = await replay;
  }
  const used = process.cpuUsage(started);
  return (used.user + used.system) / N;
}

(async () => {
  for (const [name, value] of Object.entries(BODIES)) {
    const plain = [],
      sealed = [];
    (await run(value, false), await run(value, true)); // warm-up
    for (let r = 0; r < ROUNDS; r++) {
      if (r % 2) (sealed.push(await run(value, true)), plain.push(await run(value, false)));
      else (plain.push(await run(value, false)), sealed.push(await run(value, true)));
    }
    const bytes = JSON.stringify(value).length;
    const [p, s] = [median(plain), median(sealed)];
    console.log(
      `${name} (${bytes} B JSON): store + replay ${p.toFixed(1)} µs plain, ${s.toFixed(1)} µs sealed, +${(s - p).toFixed(1)} µs`,
    );
  }
})();
