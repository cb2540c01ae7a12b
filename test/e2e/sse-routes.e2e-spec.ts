import { Controller, Module, Sse } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { interval, map, take, type Observable } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib';

/**
 * A server-sent event stream has no single response to store and replay: `@Idempotent()` on an
 * `@Sse()` route fails at boot, as on a GraphQL subscription or a streaming gRPC method, instead
 * of running it unprotected with a warning at the first request. A stream in an idempotent class
 * is left alone (test/e2e/http.e2e-spec.ts).
 */
@Controller('feed')
class FeedController {
  @Sse('events')
  @Idempotent()
  events(): Observable<{ data: number }> {
    return interval(5).pipe(
      take(1),
      map((i) => ({ data: i })),
    );
  }
}

@Module({ imports: [IdempotencyModule.forRoot()], controllers: [FeedController] })
class FeedModule {}

describe('@Idempotent() on an @Sse() route', () => {
  it('fails at boot, naming the route', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [FeedModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await expect(app.init()).rejects.toThrow(
        'IdempotencyModule: FeedController.events is an @Sse() route',
      );
    } finally {
      await app.close();
    }
  });
});
