import Redis from 'ioredis';
import { connect } from 'node:net';
import {
  deleteKeysUnder,
  inspectionClient,
  keysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { PLATFORMS, post, startTestApp, TestApp } from '../support/test-app';

/** Sends raw bytes (what a well-behaved client library refuses to send) and returns the status. */
function rawRequest(url: string, head: string, body = ''): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let response = '';
    socket.on('data', (chunk) => {
      response += chunk.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(response);
      if (status) {
        socket.destroy();
        resolve(Number(status[1]));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(0));
    socket.write(
      `${head}\r\nHost: ${hostname}\r\nContent-Length: ${Buffer.byteLength(body, 'latin1')}\r\n` +
        `Connection: close\r\n\r\n`,
      'latin1',
    );
    socket.end(body, 'latin1');
  });
}

const RAW_KEYS = [
  'evil{tag}',
  'glob*?[x]',
  'unicode-\u00e9\u00e8',
  'nul-\u0000-key',
  'ctl-\u0007-key',
  'a'.repeat(256),
];

describe.each(PLATFORMS)('hostile input on %s', (platform) => {
  const prefix = uniquePrefix(`hostile-${platform}`);
  let t: TestApp;
  let redis: Redis;

  beforeAll(async () => {
    redis = inspectionClient();
    t = await startTestApp(platform, { redis: testRedisUrl(), keyPrefix: prefix });
  });
  afterAll(async () => {
    await t.close();
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
  });

  const stored = () => keysUnder(redis, prefix);

  it.each([
    ['a NUL byte', 'nul-\u0000-key'],
    ['a BEL control character', 'ctl-\u0007-key'],
    ['a tab', 'tab\tkey'],
    ['non-ASCII bytes', 'caf\u00e9'],
    ['256 characters', 'k'.repeat(256)],
    ['only spaces', '   '],
  ])('answers 4xx to a raw key with %s, stores nothing, runs nothing', async (_, key) => {
    const before = (await stored()).length;
    const runs = t.executions.count('create');
    const status = await rawRequest(
      t.url,
      `POST /payments HTTP/1.1\r\nContent-Type: application/json\r\nIdempotency-Key: ${key}`,
      '{"amount":1}',
    );
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
    expect(await stored()).toHaveLength(before);
    expect(t.executions.count('create')).toBe(runs);
  });

  it('rejects CRLF injection in the key header before anything runs', async () => {
    const status = await rawRequest(
      t.url,
      'POST /payments HTTP/1.1\r\nIdempotency-Key: a\rSet-Cookie: x=1',
      '',
    );
    expect(status).toBe(400);
  });

  it('rejects a very long header with 431 and stays up', async () => {
    const status = await rawRequest(
      t.url,
      `POST /payments HTTP/1.1\r\nIdempotency-Key: ${'k'.repeat(20_000)}`,
    );
    expect([400, 431]).toContain(status);
  });

  it.each([
    ['invalid JSON', '{"amount":', 'application/json'],
    ['a body over the parser limit', `{"pad":"${'x'.repeat(2_000_000)}"}`, 'application/json'],
  ])('answers 4xx to %s and frees the key', async (_, body, type) => {
    const key = `body-${Date.now()}-${Math.random()}`;
    const before = (await stored()).length;
    const status = await rawRequest(
      t.url,
      `POST /payments HTTP/1.1\r\nContent-Type: ${type}\r\nIdempotency-Key: ${key}`,
      body,
    );
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
    expect(await stored()).toHaveLength(before);
  });

  it('handles a binary body: Express passes it through unparsed, Fastify answers 415', async () => {
    const key = `binary-${Date.now()}`;
    const send = () =>
      fetch(`${t.url}/payments/text`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/octet-stream', 'Idempotency-Key': key },
        body: new Uint8Array([0, 255, 1, 254, 10, 13]),
      });
    const before = (await stored()).length;
    const first = await send();
    const again = await send();
    if (platform === 'express') {
      expect(first.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    } else {
      expect([first.status, again.status]).toEqual([415, 415]);
      expect(await stored()).toHaveLength(before);
    }
  });

  it('fingerprints a body nested 5 000 levels deep and replays it', async () => {
    const key = `deep-${Date.now()}`;
    const body = `{"amount":1,"deep":${'['.repeat(5_000)}${']'.repeat(5_000)}}`;
    // /payments/text ignores its body, so only the module's own work on the body is tested.
    const first = await post(t.url, '/payments/text', { key, body });
    const again = await post(t.url, '/payments/text', { key, body });
    expect(first.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  it('keeps every raw client key out of Redis key names, and the app stays up', async () => {
    for (const key of ['evil{tag}', 'glob*?[x]', 'sp ace', '"quoted"', '%00%0d%0a']) {
      expect((await post(t.url, '/payments', { key, body: { amount: 2 } })).status).toBe(201);
    }
    for (const key of RAW_KEYS) {
      await rawRequest(t.url, `POST /payments HTTP/1.1\r\nIdempotency-Key: ${key}`, '');
    }
    const names = await stored();
    expect(names.length).toBeGreaterThan(0);
    // Records are `<prefix>{hash}`; the listing index beside them has names of its own, none of
    // them made of client input.
    const quoted = prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const name of names) {
      expect(name).toMatch(
        new RegExp(`^${quoted}(\\{[A-Za-z0-9_-]{22}\\}|ix:(runs|ttls|done:\\d+))$`),
      );
    }
    expect((await post(t.url, '/payments/plain', {})).status).toBe(201);
  });

  it('never stores Authorization, Cookie or Set-Cookie', async () => {
    const key = `secrets-${Date.now()}`;
    await post(t.url, '/payments', {
      key,
      body: { amount: 3 },
      headers: { Authorization: 'Bearer top-secret-token', Cookie: 'session=cookie-secret' },
    });
    const [completed] = t.executions.ofType('completed').slice(-1);
    // The raw bytes of the record, whatever its layout.
    const everything = (await redis.getBuffer(completed.key!))!.toString('latin1');
    expect(everything).not.toMatch(
      /top-secret-token|cookie-secret|authorization|set-cookie|session=secret/i,
    );
  });
});
