import { Body, Controller, ExecutionContext, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib';
import { listen } from '../support/http-app';
import { PLATFORMS, post } from '../support/test-app';

/**
 * A fingerprint function that returns a Map (or a Set), as one built from a DTO's fields might:
 * every Map used to fingerprint alike, so the same key with another amount replayed the first
 * response instead of answering 422.
 */

let runs = 0;

const fields = (ctx: ExecutionContext) => {
  const body = ctx.switchToHttp().getRequest<{ body: Record<string, unknown> }>().body;
  return new Map(Object.entries(body));
};

@Controller('payments')
class PaymentsController {
  @Post('map')
  @Idempotent({ fingerprint: fields })
  map(@Body() body: { amount: number }) {
    return { run: ++runs, amount: body.amount };
  }

  @Post('set')
  // Strings only: a Set whose items are all strings (or all numbers) is sorted.
  @Idempotent({ fingerprint: (ctx) => new Set([...fields(ctx)].map(([k, v]) => `${k}=${v}`)) })
  set(@Body() body: { amount: number }) {
    return { run: ++runs, amount: body.amount };
  }
}

describe.each(PLATFORMS)('a fingerprint function returning a Map or a Set on %s', (platform) => {
  let app: Awaited<ReturnType<typeof NestFactory.create>>;
  let url: string;

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot({})], controllers: [PaymentsController] })
    class AppModule {}
    ({ app, url } = await listen(platform, AppModule));
  });

  afterAll(() => app?.close());

  it.each(['map', 'set'])('answers 422 to the same key with a changed %s', async (kind) => {
    const key = randomUUID();
    const path = `/payments/${kind}`;
    const first = await post(url, path, { key, body: { amount: 100, currency: 'EUR' } });
    expect(first.status).toBe(201);

    const changed = await post(url, path, { key, body: { amount: 999, currency: 'EUR' } });
    expect(changed.status).toBe(422);
    expect(changed.headers.get('idempotent-replayed')).toBeNull();

    // The same content in another order is the same request: replayed.
    const same = await post(url, path, { key, body: { currency: 'EUR', amount: 100 } });
    expect(same.headers.get('idempotent-replayed')).toBe('true');
    expect(same.text).toBe(first.text);
  });
});
