import {
  Body,
  CanActivate,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  Post,
  UseGuards,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, IdempotencyService, Idempotent } from '../../lib';
import { listen } from '../support/http-app';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';
import { post } from '../support/test-app';

/**
 * `localReplayCache` keeps outcomes by record, and a record belongs to one caller: with the cache
 * on, a caller never gets another caller's replay from memory, on a route scoped to its principal
 * or in another run() scope, even right after the other caller's replay was kept. (Payloads
 * and deletions: local-replay-cache.e2e-spec.ts.)
 */
const keyPrefix = uniquePrefix('local-replay-callers');
let runs = 0;

/** The caller, from a header: what an auth guard puts in request.user. */
@Injectable()
class HeaderAuth implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string>; user?: object }>();
    request.user = { id: request.headers['x-user'] };
    return true;
  }
}

@Controller()
@UseGuards(HeaderAuth)
class PaymentsController {
  @Post('payments')
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { id: `payment-${++runs}`, amount: body.amount };
  }
}

describe('localReplayCache and the owners of records', () => {
  let url: string;
  let close: () => Promise<void>;
  let service: IdempotencyService;

  beforeAll(async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({ redis: testRedisUrl(), keyPrefix, localReplayCache: true }),
      ],
      controllers: [PaymentsController],
    })
    class AppModule {}
    const started = await listen('express', AppModule);
    url = started.url;
    service = started.app.get(IdempotencyService);
    close = () => started.app.close();
  });
  afterAll(async () => {
    await close?.();
    await cleanUpPrefix(keyPrefix);
  });

  const pay = (user: string, key: string) =>
    post(url, '/payments', { key, body: { amount: 100 }, headers: { 'x-user': user } });

  it("never replays one principal's response to another from memory", async () => {
    const key = randomUUID();
    const first = (await pay('alice', key)).json();
    await pay('alice', key); // replayed from the store: kept in memory now
    const alice = await pay('alice', key); // replayed from memory
    expect(alice.json()).toEqual(first);
    const bob = await pay('bob', key);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(bob.json()).not.toEqual(first);
  });

  it('never replays one run() scope to another from memory', async () => {
    const key = randomUUID();
    await service.run(key, () => 'invoice', { scope: 'invoices' });
    await service.run(key, () => 'invoice again', { scope: 'invoices' });
    await expect(service.run(key, () => 'ignored', { scope: 'invoices' })).resolves.toBe('invoice');
    await expect(service.run(key, () => 'refund', { scope: 'refunds' })).resolves.toBe('refund');
  });
});
