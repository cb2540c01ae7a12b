import { Controller, INestApplication, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib';
import { listen } from '../support/http-app';
import { PLATFORMS, Platform, post } from '../support/test-app';

/**
 * The `key` and `fingerprint` functions are the app's code run on the request path before the
 * claim. Issue 15 promises: "errors thrown by them answer 400 for the key, 500-class never"; the
 * docs: "If it throws (or rejects), the request is refused with 400 and nothing runs". These feed
 * them values a careless implementation produces and check the promise, and that a hung function
 * cannot hang the request forever (storeTimeout bounds store calls only).
 */
let runs = 0;

@Controller('hooks')
class HooksController {
  /** An async key lookup (a cache, a DB) that never answers: the request must still end. */
  @Post('key-hangs')
  @Idempotent({ scope: 'public', storeTimeout: 300, key: () => new Promise<string>(() => {}) })
  keyHangs() {
    return { run: ++runs };
  }

  @Post('fingerprint-hangs')
  @Idempotent({ scope: 'public', storeTimeout: 300, fingerprint: () => new Promise(() => {}) })
  fingerprintHangs() {
    return { run: ++runs };
  }

  /** Throws a value without a string form (a null-prototype object, as some parsers build). */
  @Post('key-throws-bare-object')
  @Idempotent({
    scope: 'public',
    key: () => {
      throw Object.assign(Object.create(null) as object, { reason: 'no key' });
    },
  })
  keyThrowsBare() {
    return { run: ++runs };
  }

  @Post('fingerprint-rejects-bare-object')
  @Idempotent({
    scope: 'public',
    fingerprint: () => Promise.reject(Object.create(null)),
  })
  fingerprintRejectsBare() {
    return { run: ++runs };
  }

  /** Returns an object whose getter throws (a lazily parsed field, an ORM entity proxy...). */
  @Post('fingerprint-getter-throws')
  @Idempotent({
    scope: 'public',
    fingerprint: () => ({
      get amount(): number {
        throw new Error('not loaded');
      },
    }),
  })
  fingerprintGetterThrows() {
    return { run: ++runs };
  }
}

async function start(platform: Platform): ReturnType<typeof listen> {
  @Module({ imports: [IdempotencyModule.forRoot({})], controllers: [HooksController] })
  class AppModule {}
  return listen(platform, AppModule);
}

/** The status, or 'no answer' when none came within `ms`. */
async function statusWithin(url: string, path: string, ms: number): Promise<number | string> {
  try {
    const response = await post(url, path, { key: randomUUID(), signal: AbortSignal.timeout(ms) });
    return response.status;
  } catch {
    return `no answer in ${ms} ms`;
  }
}

describe.each(PLATFORMS)('key and fingerprint functions that throw or hang, on %s', (platform) => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    ({ app, url } = await start(platform));
  });
  afterAll(async () => {
    await app?.close();
  });

  it.each(['key-hangs', 'fingerprint-hangs'])(
    'answers a request whose %s function never settles, instead of hanging it forever',
    async (path) => {
      // storeTimeout is 300 ms on these routes: allow ten times that.
      expect(await statusWithin(url, `/hooks/${path}`, 3_000)).toEqual(expect.any(Number));
    },
  );

  it.each([
    'key-throws-bare-object',
    'fingerprint-rejects-bare-object',
    'fingerprint-getter-throws',
  ])('answers 400, never 500, when the function fails: %s', async (path) => {
    const before = runs;
    const response = await post(url, `/hooks/${path}`, { key: randomUUID() });
    expect({ status: response.status, ran: runs - before }).toEqual({ status: 400, ran: 0 });
  });
});
