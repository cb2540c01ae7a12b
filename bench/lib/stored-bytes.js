// Stored bytes per record on Redis: MEMORY USAGE of the keys one request created (SAMPLES 0),
// beside the payload alone (key names and values), for a ~200 B and a ~100 KB JSON response.
const { post } = require('./apps');
const { round, sum } = require('./stats');

async function allKeys(redis) {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return new Set(keys);
}

async function valueBytes(redis, key) {
  const type = await redis.type(key);
  if (type === 'string') return redis.strlen(key);
  if (type === 'hash') {
    const fields = await redis.hgetallBuffer(key);
    return sum(
      Object.entries(fields).map(([field, value]) => Buffer.byteLength(field) + value.length),
    );
  }
  return 0;
}

async function storedBytes(redis, app) {
  const measure = async (size) => {
    const before = await allKeys(redis);
    const body = size ? { amount: 100, size } : { amount: 100 };
    const key = `bytes-${size}-${Date.now()}`;
    const response = await post(`${app.base}/idempotent`, body, { 'idempotency-key': key });
    if (response.status >= 300)
      throw new Error(`stored bytes: ${response.status} ${response.body}`);
    const keys = [...(await allKeys(redis))].filter((k) => !before.has(k));
    let stored = 0;
    let payload = 0;
    for (const k of keys) {
      stored += await redis.memory('USAGE', k, 'SAMPLES', 0);
      payload += Buffer.byteLength(k) + (await valueBytes(redis, k));
    }
    const raw = response.body.length;
    return {
      responseBytes: raw,
      storedBytes: stored,
      payloadBytes: payload,
      keys: keys.length,
      ratio: round(stored / raw, 3),
    };
  };
  return { '200 B': await measure(0), '100 KB': await measure(100_000) };
}

module.exports = { storedBytes };
