import {
  Body,
  CallHandler,
  CanActivate,
  Controller,
  ExecutionContext,
  INestApplication,
  Injectable,
  MiddlewareConsumer,
  Module,
  NestInterceptor,
  NestMiddleware,
  NestModule,
  Post,
  UseGuards,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Observable } from 'rxjs';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions } from '../../lib';
import { listen } from '../support/http-app';
import { cleanUpPrefix, STORES, testRedisUrl, uniquePrefix } from '../support/redis';
import { PLATFORMS, Platform, post } from '../support/test-app';

/**
 * Records are scoped to the caller's principal wherever the app sets it: in a guard, a global
 * interceptor or a middleware. On Fastify a Nest middleware gets the raw Node request, so its
 * `req.user` lands on `request.raw.user`, not on the Fastify request: read from one place only,
 * user 2 sending user 1's key and body got user 1's stored response replayed.
 */

type UserRequest = IncomingMessage & { user?: { id: string } };

function userOf(headers: IncomingMessage['headers']): { id: string } | undefined {
  const id = headers['x-user'];
  return typeof id === 'string' ? { id } : undefined;
}

@Injectable()
class UserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<UserRequest>();
    request.user = userOf(request.headers);
    return true;
  }
}

@Injectable()
class UserInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<UserRequest>();
    request.user = userOf(request.headers);
    return next.handle();
  }
}

// As docs/http.md shows it: on Fastify, `request` is the raw Node request.
@Injectable()
class UserMiddleware implements NestMiddleware {
  use(request: UserRequest, _response: unknown, next: () => void): void {
    request.user = userOf(request.headers);
    next();
  }
}

let runs = 0;

@Controller('guarded')
@UseGuards(UserGuard)
class GuardedController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { run: ++runs, amount: body.amount };
  }
}

@Controller('plain')
class PlainController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { run: ++runs, amount: body.amount };
  }
}

const WAYS = ['guard', 'middleware', 'global interceptor'] as const;
type Way = (typeof WAYS)[number];

async function startApp(
  platform: Platform,
  way: Way,
  options: IdempotencyModuleOptions,
): Promise<{ app: INestApplication; url: string; path: string }> {
  @Module({
    imports: [IdempotencyModule.forRoot(options)],
    controllers: way === 'guard' ? [GuardedController] : [PlainController],
  })
  class AppModule implements NestModule {
    configure(consumer: MiddlewareConsumer): void {
      if (way === 'middleware') consumer.apply(UserMiddleware).forRoutes(PlainController);
    }
  }
  const { app, url } = await listen(platform, AppModule, (created) => {
    if (way === 'global interceptor') created.useGlobalInterceptors(new UserInterceptor());
  });
  return { app, url, path: way === 'guard' ? '/guarded' : '/plain' };
}

describe.each(PLATFORMS)('principal scope on %s', (platform) => {
  describe.each(STORES)('with the %s store', (storeName) => {
    describe.each(WAYS)('a principal set by a %s', (way) => {
      const prefix = uniquePrefix(`principal-${platform}-${storeName}`);
      let app: INestApplication;
      let url: string;
      let path: string;

      beforeAll(async () => {
        const options = storeName === 'redis' ? { redis: testRedisUrl() } : {};
        ({ app, url, path } = await startApp(platform, way, { ...options, keyPrefix: prefix }));
      });

      afterAll(async () => {
        await app?.close();
        if (storeName === 'redis') await cleanUpPrefix(prefix);
      });

      it("never replays one user's response to another user with the same key and body", async () => {
        const key = randomUUID();
        const body = { amount: 100 };
        const first = await post(url, path, { key, body, headers: { 'x-user': '1' } });
        expect(first.status).toBe(201);

        const other = await post(url, path, { key, body, headers: { 'x-user': '2' } });
        expect(other.status).toBe(201);
        expect(other.headers.get('idempotent-replayed')).toBeNull();
        expect(other.json()).not.toEqual(first.json());

        // Each user's own retry still replays their own response.
        const retry = await post(url, path, { key, body, headers: { 'x-user': '1' } });
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.json()).toEqual(first.json());
      });
    });
  });
});
