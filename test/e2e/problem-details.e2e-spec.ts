import { createServer } from 'node:net';
import {
  DEFAULT_PROBLEM_TYPE_BASE,
  IdempotencyErrorCode,
  IdempotencyErrorTitle,
  MemoryIdempotencyStore,
} from '../../lib';
import { PLATFORMS, post, startTestApp, TestApp } from '../support/test-app';

let seq = 0;
const newKey = () => `problem-${Date.now()}-${++seq}`;

/** A loopback port nothing listens on: a Redis URL there is a store that is down. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function expectProblem(
  response: { status: number; headers: Headers; json: () => unknown },
  status: number,
  code: IdempotencyErrorCode,
  base = DEFAULT_PROBLEM_TYPE_BASE,
): void {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json(;|$)/);
  expect(response.json()).toEqual({
    type: `${base}${code.toLowerCase()}`,
    title: IdempotencyErrorTitle[code],
    status,
    detail: expect.any(String),
    code,
  });
}

describe.each(PLATFORMS)('RFC 9457 problem details on %s', (platform) => {
  describe('with problemDetails: true', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(platform, {
        store: new MemoryIdempotencyStore(),
        problemDetails: true,
      });
    });
    afterAll(() => t.close());

    it('answers a missing required key with a 400 application/problem+json body', async () => {
      const response = await post(t.url, '/payments/required');
      expectProblem(response, 400, IdempotencyErrorCode.KeyMissing);
      expect(response.json()).toMatchObject({
        detail: 'This handler requires an idempotency key (Idempotency-Key).',
      });
    });

    it('answers an invalid key with 400 IDEMPOTENCY_KEY_INVALID', async () => {
      const response = await post(t.url, '/payments', { key: 'k'.repeat(256), body: {} });
      expectProblem(response, 400, IdempotencyErrorCode.KeyInvalid);
    });

    it('answers a duplicate in progress with 409 and keeps Retry-After', async () => {
      const key = newKey();
      const first = post(t.url, '/payments/slow', { key, body: { n: 1 } });
      const release = await t.executions.nextStarted();
      try {
        const duplicate = await post(t.url, '/payments/slow', { key, body: { n: 1 } });
        expectProblem(duplicate, 409, IdempotencyErrorCode.InProgress);
        expect(Number(duplicate.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      } finally {
        release();
      }
      expect((await first).status).toBe(201);
    });

    it('answers a reused key with another payload with 422 IDEMPOTENCY_KEY_REUSED', async () => {
      const key = newKey();
      expect((await post(t.url, '/payments', { key, body: { amount: 1 } })).status).toBe(201);
      const reused = await post(t.url, '/payments', { key, body: { amount: 2 } });
      expectProblem(reused, 422, IdempotencyErrorCode.KeyReused);
    });

    it("leaves the handler's own errors and successful responses as they were", async () => {
      const failed = await post(t.url, '/payments/fail', { key: newKey() });
      expect(failed.status).toBe(402);
      expect(failed.headers.get('content-type')).toMatch(/^application\/json/);
      expect(failed.json()).toEqual({ reason: 'card declined', attempt: 1 });

      const created = await post(t.url, '/payments', { key: newKey(), body: { amount: 3 } });
      expect(created.status).toBe(201);
      expect(created.headers.get('content-type')).toMatch(/^application\/json/);
    });
  });

  describe('with problemDetails: { typeBaseUri } and the store down', () => {
    let t: TestApp;
    const base = 'https://errors.example.com/idempotency/';
    beforeAll(async () => {
      t = await startTestApp(platform, {
        redis: `redis://127.0.0.1:${await closedPort()}`,
        storeTimeout: 300,
        problemDetails: { typeBaseUri: base },
      });
    });
    afterAll(() => t.close());

    it('answers 503 with the configured type base and Retry-After: 1', async () => {
      const response = await post(t.url, '/payments', { key: newKey(), body: { amount: 1 } });
      expectProblem(response, 503, IdempotencyErrorCode.StoreUnavailable, base);
      expect(response.headers.get('retry-after')).toBe('1');
      expect(t.executions.count('create')).toBe(0);
    });
  });

  describe('without problemDetails (the default)', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(platform, { store: new MemoryIdempotencyStore() });
    });
    afterAll(() => t.close());

    it("keeps Nest's JSON error body", async () => {
      const response = await post(t.url, '/payments/required');
      expect(response.status).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(response.json()).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        code: IdempotencyErrorCode.KeyMissing,
        message: 'This handler requires an idempotency key (Idempotency-Key).',
      });
    });
  });
});
