import Redis from 'ioredis';
import { Logger } from '@nestjs/common';
import { IdempotencyModuleOptions, MemoryIdempotencyStore } from '../../lib';
import {
  deleteKeysUnder,
  inspectionClient,
  keysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import {
  deferred,
  PLATFORMS,
  Platform,
  post,
  RetryInterceptor,
  startTestApp,
  TestApp,
} from '../support/test-app';
import { readRecord } from '../support/records';

type StoreKind = 'redis' | 'memory';
const MATRIX: [Platform, StoreKind][] = PLATFORMS.flatMap(
  (p) =>
    [
      [p, 'redis'],
      [p, 'memory'],
    ] as [Platform, StoreKind][],
);

let redis: Redis;
beforeAll(() => {
  redis = inspectionClient();
});
afterAll(async () => {
  await redis.quit();
});

let seq = 0;
const newKey = () => `key-${Date.now()}-${++seq}`;

describe.each(MATRIX)('HTTP on %s with the %s store', (platform, storeKind) => {
  const prefix = uniquePrefix(`http-${platform}-${storeKind}`);
  let t: TestApp;

  beforeAll(async () => {
    const options: IdempotencyModuleOptions =
      storeKind === 'redis'
        ? { redis: testRedisUrl(), keyPrefix: prefix }
        : { store: new MemoryIdempotencyStore(), keyPrefix: prefix };
    t = await startTestApp(platform, options);
  });
  afterAll(async () => {
    await t.close();
    await deleteKeysUnder(redis, prefix);
  });
  /** The Redis record of the request that completed last. */
  const lastCompletedRecord = () =>
    readRecord(redis, t.executions.ofType('completed').slice(-1)[0].key!);

  describe('first request and replay', () => {
    it('runs the handler once and replays status, allowlisted headers and JSON body byte for byte', async () => {
      const key = newKey();
      const body = { amount: 100, currency: 'EUR' };
      const first = await post(t.url, '/payments', { key, body });
      expect(first.status).toBe(201);
      expect(first.headers.get('set-cookie')).toBe('session=secret');
      expect(first.headers.get('idempotent-replayed')).toBeNull();

      const replay = await post(t.url, '/payments', {
        key,
        body: { currency: 'EUR', amount: 100 },
      });
      expect(replay.status).toBe(201);
      expect(replay.bytes.equals(first.bytes)).toBe(true);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(replay.headers.get('location')).toBe('/payments/42');
      expect(replay.headers.get('etag')).toBe('"v1"');
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(t.executions.count('create')).toBe(1);
    });

    it('never replays Set-Cookie or headers outside the allowlist', async () => {
      const key = newKey();
      await post(t.url, '/payments', { key, body: { amount: 1 } });
      const replay = await post(t.url, '/payments', { key, body: { amount: 1 } });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('set-cookie')).toBeNull();
      expect(replay.headers.get('x-not-replayed')).toBeNull();
      expect(replay.headers.get('cache-control')).toBe('no-store');
      if (storeKind === 'redis') {
        const record = await lastCompletedRecord();
        const meta = record?.state === 'c' ? record.meta : '';
        expect(meta).not.toMatch(/set-cookie|secret|x-not-replayed/i);
        expect(meta).toContain('location');
      }
    });

    it('replays string bodies byte for byte', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/text', { key });
      const replay = await post(t.url, '/payments/text', { key });
      expect(first.status).toBe(201);
      expect(replay.text).toBe('plain text #1');
      expect(replay.bytes.equals(first.bytes)).toBe(true);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    });

    it('replays Buffer bodies byte for byte', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/binary', { key });
      const replay = await post(t.url, '/payments/binary', { key });
      // Nest sends a Buffer raw on Fastify and as JSON on Express; either way a replay matches.
      if (platform === 'fastify') expect([...first.bytes]).toEqual([0, 1, 2, 255, 254, 1]);
      expect(replay.bytes.equals(first.bytes)).toBe(true);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(t.executions.count('binary')).toBe(1);
    });

    it('replays a typed array as the same bytes and content type', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/bytes', { key });
      const replay = await post(t.url, '/payments/bytes', { key });
      // Fastify sends a typed array raw; Express sends it as JSON. A replay must do the same.
      if (platform === 'fastify') expect([...first.bytes]).toEqual([104, 105, 1]);
      else expect(first.json()).toEqual({ 0: 104, 1: 105, 2: 1 });
      expect(replay.bytes.equals(first.bytes)).toBe(true);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(t.executions.count('bytes')).toBe(1);
    });

    it.each([
      ['/payments/account', { id: 1, name: 'alice' }],
      ['/payments/wrapped-account', { account: { id: 1, name: 'alice' } }],
      [
        '/payments/accounts',
        [
          { id: 1, name: 'alice', note: 'internal' },
          { id: 2, name: 'bob', note: 'internal' },
        ],
      ],
    ])(
      'stores %s as ClassSerializerInterceptor sends it: hidden fields stay hidden',
      async (path, expected) => {
        const key = newKey();
        const first = await post(t.url, path, { key });
        const replay = await post(t.url, path, { key });
        expect(first.json()).toEqual(expected);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.json()).toEqual(expected);
        if (storeKind === 'redis') {
          const record = await lastCompletedRecord();
          expect(record?.state === 'c' && record.body.toString()).toContain('alice');
          expect(record?.state === 'c' && record.body.toString()).not.toContain('hunter2');
        }
      },
    );

    it('stores a null response and replays it', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/nothing', { key });
      const replay = await post(t.url, '/payments/nothing', { key });
      expect(first.status).toBe(201);
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(t.executions.count('nothing')).toBe(1);
    });

    it('compresses a large JSON body in the store and replays it byte for byte', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/report', { key });
      const replay = await post(t.url, '/payments/report', { key });
      expect(first.bytes.length).toBeGreaterThan(100_000);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.bytes.equals(first.bytes)).toBe(true);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      if (storeKind === 'redis') {
        const [completed] = t.executions.ofType('completed').slice(-1);
        const record = await readRecord(redis, completed.key!);
        expect(record?.state === 'c' && JSON.parse(record.meta).z).toBe('brotli');
        expect(await redis.memory('USAGE', completed.key!)).toBeLessThan(first.bytes.length / 5);
      }
    });

    it('replays an empty 204', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/empty', { key });
      const replay = await post(t.url, '/payments/empty', { key });
      expect(first.status).toBe(204);
      expect(replay.status).toBe(204);
      expect(replay.bytes.length).toBe(0);
      expect(t.executions.count('empty')).toBe(1);
    });

    it('treats the sf-string form "abc" as the key abc', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments', { key, body: { amount: 7 } });
      const replay = await post(t.url, '/payments', { key: `"${key}"`, body: { amount: 7 } });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.bytes.equals(first.bytes)).toBe(true);
    });
  });

  describe('concurrent duplicates', () => {
    it('answers 409 with Retry-After of 1 s (no run timed yet) and a JSON error while the first runs', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const first = post(t.url, '/payments/slow', { key, body: {} });
      const release = await started;
      const duplicate = await post(t.url, '/payments/slow', { key, body: {} });
      expect(duplicate.status).toBe(409);
      const retryAfter = Number(duplicate.headers.get('retry-after'));
      expect(retryAfter).toBe(1);
      expect(duplicate.json()).toEqual({
        statusCode: 409,
        error: 'Conflict',
        code: 'IDEMPOTENCY_IN_PROGRESS',
        message: expect.stringContaining('still being processed'),
      });
      release();
      expect((await first).status).toBe(201);
      const replay = await post(t.url, '/payments/slow', { key, body: {} });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json()).toEqual({ run: 1 });
      expect(t.executions.count('slow')).toBe(1);
    });
  });

  describe('when the caller goes away', () => {
    it('lets the handler finish and records it when the client disconnects; a retry never runs it again', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const abort = new AbortController();
      const first = post(t.url, '/payments/slow', {
        key,
        body: { hold: true },
        signal: abort.signal,
      });
      const release = await started;
      abort.abort();
      await expect(first).rejects.toThrow();
      expect((await post(t.url, '/payments/slow', { key, body: { hold: true } })).status).toBe(409);
      const completed = t.executions.waitFor('completed');
      release();
      await completed;
      const retry = await post(t.url, '/payments/slow', { key, body: { hold: true } });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(
        t.executions.ofType('released').filter((e) => e.handler === 'PaymentsController.slow'),
      ).toEqual([]);
    });
  });

  describe('payload mismatch', () => {
    it('answers 422 when the key comes back with another body', async () => {
      const key = newKey();
      await post(t.url, '/payments', { key, body: { amount: 1 } });
      const other = await post(t.url, '/payments', { key, body: { amount: 2 } });
      expect(other.status).toBe(422);
      expect(other.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', statusCode: 422 });
      expect(t.executions.count('create')).toBeGreaterThan(0);
    });

    it('answers 422 for the same key on another URL of the same handler', async () => {
      const key = newKey();
      await post(t.url, '/payments?ref=a', { key, body: { amount: 1 } });
      expect((await post(t.url, '/payments?ref=b', { key, body: { amount: 1 } })).status).toBe(422);
    });

    it('answers 422 rather than 409 while the first is still running', async () => {
      const key = newKey();
      const started = t.executions.nextStarted();
      const first = post(t.url, '/payments/slow', { key, body: { hold: true, v: 1 } });
      const release = await started;
      const other = await post(t.url, '/payments/slow', { key, body: { hold: true, v: 2 } });
      expect(other.status).toBe(422);
      release();
      expect((await first).status).toBe(201);
    });

    it('fingerprints text/plain bodies (Express with a text body parser)', async () => {
      const key = newKey();
      const headers = { 'Content-Type': 'text/plain' };
      expect(
        (await post(t.url, '/payments/text', { key, body: 'amount=100', headers })).status,
      ).toBe(201);
      const other = await post(t.url, '/payments/text', { key, body: 'amount=999999', headers });
      expect(other.status).toBe(422);
    });

    it('skips the check with fingerprint: false', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments/no-fingerprint', { key, body: { a: 1 } });
      const replay = await post(t.url, '/payments/no-fingerprint', { key, body: { a: 2 } });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.bytes.equals(first.bytes)).toBe(true);
    });
  });

  describe('missing and invalid keys', () => {
    it('passes requests without a key through, unprotected', async () => {
      const before = t.executions.count('create');
      await post(t.url, '/payments', { body: { amount: 1 } });
      await post(t.url, '/payments', { body: { amount: 1 } });
      expect(t.executions.count('create')).toBe(before + 2);
    });

    it('answers 400 without a key when required, and runs nothing', async () => {
      const missing = await post(t.url, '/payments/required');
      expect(missing.status).toBe(400);
      expect(missing.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING' });
      expect(t.executions.count('required')).toBe(0);
      expect((await post(t.url, '/payments/required', { key: newKey() })).status).toBe(201);
    });

    it.each([
      ['empty', ''],
      ['256 characters', 'k'.repeat(256)],
      ['a tab (control character)', 'ab\tcd'],
      ['a non-ASCII byte', 'caf\u00e9'],
      ['an empty sf-string', '""'],
      ['an escaped closing quote', '"x\\"'],
      ['no closing quote', '"abc'],
      ['a list in one header', 'a, b'],
      ['a list of strings', '"a", "b"'],
      ['a parameter on a bare key', 'abc;p=1'],
      ['a malformed parameter', '"abc";P=1'],
    ])('answers 400 to a key with %s and stores nothing', async (_, key) => {
      const before = storeKind === 'redis' ? (await keysUnder(redis, prefix)).length : 0;
      const response = await post(t.url, '/payments', { key, body: { amount: 1 } });
      expect(response.status).toBe(400);
      expect(response.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_INVALID' });
      if (storeKind === 'redis') expect((await keysUnder(redis, prefix)).length).toBe(before);
    });

    it('reads a quoted key with parameters as the key itself (RFC 8941 sf-string)', async () => {
      const key = newKey();
      const first = await post(t.url, '/payments', { key, body: { amount: 1 } });
      for (const form of [`"${key}"`, `"${key}";p=1;q`, ` "${key}" `]) {
        const again = await post(t.url, '/payments', { key: form, body: { amount: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.text).toBe(first.text);
      }
    });

    it('reads the key through the key option, checking its characters and length', async () => {
      const requestId = newKey();
      const first = await post(t.url, '/payments/custom-key', {
        headers: { 'x-request-id': requestId },
      });
      const again = await post(t.url, '/payments/custom-key', {
        headers: { 'x-request-id': requestId },
      });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.text).toBe(first.text);
      const tooLong = await post(t.url, '/payments/custom-key', {
        headers: { 'x-request-id': 'k'.repeat(256) },
      });
      expect(tooLong.status).toBe(400);
      expect(tooLong.json()).toMatchObject({ code: 'IDEMPOTENCY_KEY_INVALID' });
      expect(t.executions.count('custom-key')).toBe(1);
    });

    it('answers 400 to a repeated Idempotency-Key header', async () => {
      const { request } = await import('node:http');
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(`${t.url}/payments`, {
          method: 'POST',
          headers: [
            ['Idempotency-Key', 'one'],
            ['Idempotency-Key', 'two'],
          ].flat() as unknown as Record<string, string>,
        });
        req.on('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      expect(status).toBe(400);
    });
  });

  describe('handler errors', () => {
    it('releases the claim and passes HttpExceptions and other errors through unchanged', async () => {
      const key = newKey();
      const declined = await post(t.url, '/payments/fail', { key });
      expect(declined.status).toBe(402);
      expect(declined.json()).toEqual({ reason: 'card declined', attempt: 1 });
      const crashed = await post(t.url, '/payments/fail', { key });
      expect(crashed.status).toBe(500);
      expect(crashed.json()).toEqual({ statusCode: 500, message: 'Internal server error' });
      const succeeded = await post(t.url, '/payments/fail', { key });
      expect(succeeded.status).toBe(201);
      expect(succeeded.json()).toEqual({ run: 3 });
      expect(t.executions.count('fail')).toBe(3);
      expect(t.executions.ofType('released').length).toBeGreaterThanOrEqual(2);
    });

    it('releases the claim when the ValidationPipe rejects the body', async () => {
      const key = newKey();
      const invalid = await post(t.url, '/payments/validated', { key, body: { amount: -1 } });
      expect(invalid.status).toBe(400);
      expect(invalid.json()).toMatchObject({ statusCode: 400, message: expect.any(Array) });
      const again = await post(t.url, '/payments/validated', { key, body: { amount: -1 } });
      expect(again.status).toBe(400);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      const valid = await post(t.url, '/payments/validated', {
        key: newKey(),
        body: { amount: 5, currency: 'EUR' },
      });
      expect(valid.status).toBe(201);
      expect(t.executions.count('validated')).toBe(1);
    });
  });

  describe('responses that cannot be replayed', () => {
    it.each([
      ['a StreamableFile', '/payments/file', 'file'],
      ['a web ReadableStream', '/payments/web-stream', 'web-stream'],
      ['a @Res() handler', '/payments/raw', 'raw'],
      ['a body over maxResponseBytes', '/payments/big', 'big'],
      ['an object whose JSON is a bare string (a Date)', '/payments/date', 'date'],
    ])('sends %s, stores nothing and frees the key', async (_, path, name) => {
      const key = newKey();
      const first = await post(t.url, path, { key });
      expect(first.status).toBeLessThan(300);
      const second = await post(t.url, path, { key });
      expect(second.status).toBeLessThan(300);
      expect(second.headers.get('idempotent-replayed')).toBeNull();
      expect(t.executions.count(name)).toBe(2);
      expect(t.executions.ofType('not_replayable').length).toBeGreaterThan(0);
    });
  });

  it('drops the headers of a 409 when an outer retry gets the replay after all', async () => {
    const retried = await startTestApp(
      platform,
      { store: new MemoryIdempotencyStore(), problemDetails: true },
      (app) => app.useGlobalInterceptors(new RetryInterceptor()),
    );
    try {
      const key = newKey();
      const first = post(retried.url, '/payments/retried', { key });
      const release = await retried.executions.nextStarted();
      // The duplicate gets 409 (Retry-After, problem+json) and its outer retry() tries again.
      const duplicate = post(retried.url, '/payments/retried', { key });
      await retried.executions.waitFor('conflict', 2);
      release();
      const [answer, replay] = await Promise.all([first, duplicate]);
      expect(answer.status).toBe(201);
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('retry-after')).toBeNull();
      expect(replay.headers.get('content-type')).toBe(answer.headers.get('content-type'));
      expect(replay.headers.get('content-type')).toMatch(/^application\/json/);
      expect(replay.json()).toEqual({ run: 1 });
      expect(retried.executions.count('retried')).toBe(1);
    } finally {
      await retried.close();
    }
  });

  it('warns once per handler and kind, not once per response size', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    try {
      for (const size of [200, 300, 400]) {
        const response = await post(t.url, '/payments/sized', { key: newKey(), body: { size } });
        expect(response.status).toBe(201);
      }
      expect(t.executions.count('sized')).toBe(3);
      const warnings = warn.mock.calls.filter(([message]) =>
        String(message).includes('sized: not stored'),
      );
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0][0])).toMatch(/over maxResponseBytes/);
    } finally {
      warn.mockRestore();
    }
  });

  it('leaves @Sse() streams of an idempotent class untouched: the handler runs every time', async () => {
    const key = newKey();
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${t.url}/orders/events`, {
        headers: { 'Idempotency-Key': key },
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
      await response.body?.cancel();
    }
    expect(t.executions.count('events')).toBe(2);
    const touched = t.executions.events.filter((e) => e.handler === 'OrdersController.events');
    expect(touched).toEqual([]);
  });

  describe('scopes', () => {
    it('keeps one key used on two endpoints apart', async () => {
      const key = newKey();
      const order = await post(t.url, '/orders', { key });
      const draft = await post(t.url, '/orders/draft', { key });
      expect(order.json()).toEqual({ order: 1 });
      expect(draft.json()).toEqual({ draft: 1 });
      expect(draft.headers.get('idempotent-replayed')).toBeNull();
    });

    it('applies class options, with method options winning', async () => {
      expect((await post(t.url, '/orders')).status).toBe(400);
      expect((await post(t.url, '/orders/draft')).status).toBe(201);
    });

    it('never shows one tenant the response stored for another', async () => {
      const key = newKey();
      const a = await post(t.url, '/payments/tenant', { key, headers: { 'x-tenant': 'a' } });
      const b = await post(t.url, '/payments/tenant', { key, headers: { 'x-tenant': 'b' } });
      expect(a.json()).toMatchObject({ tenant: 'a' });
      expect(b.json()).toMatchObject({ tenant: 'b' });
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      const againA = await post(t.url, '/payments/tenant', { key, headers: { 'x-tenant': 'a' } });
      expect(againA.bytes.equals(a.bytes)).toBe(true);
      expect(againA.headers.get('idempotent-replayed')).toBe('true');
    });

    it('leaves routes without @Idempotent() untouched', async () => {
      const key = newKey();
      await post(t.url, '/payments/plain', { key });
      const again = await post(t.url, '/payments/plain', { key });
      expect(again.json()).toEqual({ run: 2 });
      expect(again.headers.get('idempotent-replayed')).toBeNull();
    });
  });
});

describe.each(PLATFORMS)('completion ordering on %s', (platform) => {
  /** A real memory store whose completion write waits until the test lets it through. */
  class GatedStore extends MemoryIdempotencyStore {
    gate = deferred();
    override async complete(...args: Parameters<MemoryIdempotencyStore['complete']>) {
      await this.gate.promise;
      return super.complete(...args);
    }
  }

  it('stores the response before it is sent', async () => {
    const store = new GatedStore();
    const t = await startTestApp(platform, { store });
    try {
      let answered = false;
      const response = post(t.url, '/payments', { key: newKey(), body: { amount: 1 } }).then(
        (r) => {
          answered = true;
          return r;
        },
      );
      await t.executions.waitFor('claimed');
      // The handler has long returned; the response must still wait for the store.
      await post(t.url, '/payments/plain', {});
      expect(answered).toBe(false);
      store.gate.resolve();
      expect((await response).status).toBe(201);
      expect(t.executions.ofType('completed')).toHaveLength(1);
    } finally {
      await t.close();
    }
  });
});
