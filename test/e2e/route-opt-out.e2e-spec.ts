import {
  ExecutionContext,
  INestApplication,
  Injectable,
  Module,
  Controller,
  Post,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyInterceptor, IdempotencyModule } from '../../lib';
import type { ResolvedIdempotencyOptions } from '../../lib/interfaces/idempotency-options.interface';
import { listen } from '../support/http-app';
import { PLATFORMS, Platform, post } from '../support/test-app';

/**
 * The documented way to make routes idempotent without the decorator is a subclass whose
 * getRouteOptions() returns options, registered as APP_INTERCEPTOR. The documented opt-out is
 * `@Idempotent(false)`. But getRouteOptions() answers `undefined` both for "not decorated" and for
 * "explicitly opted out", so the subclass cannot honour the opt-out: the route is claimed anyway,
 * and a webhook receiver that must process every delivery gets a stale replay instead.
 */
@Injectable()
class EveryPostIsIdempotent extends IdempotencyInterceptor {
  protected override getRouteOptions(
    context: ExecutionContext,
  ): ResolvedIdempotencyOptions | undefined {
    const own = super.getRouteOptions(context);
    if (own) return own;
    const request = context.switchToHttp().getRequest<{ method: string }>();
    return request.method === 'POST' ? this.options : undefined;
  }
}

let deliveries = 0;

@Controller('webhooks')
class WebhooksController {
  /** Must run for every delivery, even when the sender reuses its key header. */
  @Post()
  @Idempotent(false)
  receive() {
    return { delivery: ++deliveries };
  }
}

describe.each(PLATFORMS)(
  '@Idempotent(false) under a global subclass on %s',
  (platform: Platform) => {
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      @Module({
        imports: [IdempotencyModule.forRoot({ scope: 'public' })],
        controllers: [WebhooksController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: EveryPostIsIdempotent }],
      })
      class AppModule {}
      ({ app, url } = await listen(platform, AppModule));
    });
    afterAll(async () => {
      await app?.close();
    });

    it('runs an opted-out route every time, never replaying it', async () => {
      const key = randomUUID();
      const before = deliveries;
      const first = await post(url, '/webhooks', { key });
      const second = await post(url, '/webhooks', { key });
      expect({
        ran: deliveries - before,
        replayed: second.headers.get('idempotent-replayed'),
        statuses: [first.status, second.status],
      }).toEqual({ ran: 2, replayed: null, statuses: [201, 201] });
    });
  },
);
