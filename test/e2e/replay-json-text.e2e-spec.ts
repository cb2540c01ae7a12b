import {
  type CallHandler,
  ClassSerializerInterceptor,
  Controller,
  type ExecutionContext,
  Header,
  type INestApplication,
  Module,
  type NestInterceptor,
  Post,
  Redirect,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import express, { type NextFunction, type Request, type Response } from 'express';
import { map } from 'rxjs';
import { Idempotent, IdempotencyModule, MemoryIdempotencyStore } from '../../lib';
import { listen } from '../support/http-app';
import { Account, PLATFORMS, type Platform, post } from '../support/test-app';

/**
 * A replay of a JSON body on Express hands Express the stored JSON text, which it sends as it is,
 * rather than the decoded value, serialised a second time: only where nothing between the
 * interceptor and the client needs the value. Everywhere, the replay is the first response byte
 * for byte.
 */

/** Text a serialiser may write in more than one way: non-ASCII, U+2028, HTML (`json escape`). */
const ORDER = {
  id: 'ord_1',
  total: 12.5,
  lines: [{ sku: 'é-ü', qty: 2 }],
  note: '<b>a\u2028b</b> "quoted" \\ 😀',
};

@Controller('orders')
class OrdersController {
  runs = 0;

  @Post()
  @Idempotent()
  create() {
    this.runs++;
    return ORDER;
  }

  @Post('count')
  @Idempotent()
  count() {
    this.runs++;
    return 42;
  }

  @Post('typed')
  @Idempotent()
  @Header('Content-Type', 'application/vnd.api+json')
  typed() {
    this.runs++;
    return { data: ORDER };
  }

  @Post('moved')
  @Idempotent()
  @Redirect('/orders/default', 302)
  moved() {
    this.runs++;
    return { url: '/orders/ord_1' };
  }

  @Post('account')
  @Idempotent()
  account() {
    this.runs++;
    return new Account(7, 'Ada', 'hunter2');
  }
}

/** A global interceptor that needs the value: it wraps it. */
class Envelope implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(map((data: unknown) => ({ data })));
  }
}

let seq = 0;
const newKey = () => `json-text-${Date.now()}-${++seq}`;

/** The app, with `configure` run before it listens. */
async function start(
  platform: Platform,
  configure?: (app: INestApplication) => void,
): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [IdempotencyModule.forRoot({ store: new MemoryIdempotencyStore() })],
    controllers: [OrdersController],
  })
  class AppModule {}
  return listen(platform, AppModule, configure);
}

/**
 * Posts `path` twice with one key: the first response, the replay, and how often each serialised
 * a handler's value (JSON.stringify of an object with an `id` or a `data`): the first response
 * twice (stored, then sent), a replay once where the value is serialised again, else never.
 */
async function firstAndReplay(t: { url: string }, path: string) {
  const key = newKey();
  const serialised = [0, 0];
  let request = 0;
  const stringify = JSON.stringify;
  const spy = jest.spyOn(JSON, 'stringify').mockImplementation(function (
    this: JSON,
    ...args: Parameters<typeof JSON.stringify>
  ) {
    const [value] = args;
    if (typeof value === 'object' && value !== null && ('id' in value || 'data' in value)) {
      serialised[request]++;
    }
    return stringify.apply(this, args);
  });
  try {
    const first = await post(t.url, path, { key, body: { n: 1 } });
    request = 1;
    const replay = await post(t.url, path, { key, body: { n: 1 } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    return { first, replay, serialised };
  } finally {
    spy.mockRestore();
  }
}

/** The replay is the first response: status, body bytes and the headers that describe them. */
function expectSameResponse(
  first: Awaited<ReturnType<typeof post>>,
  replay: Awaited<ReturnType<typeof post>>,
) {
  expect(replay.status).toBe(first.status);
  expect(replay.text).toBe(first.text);
  expect(replay.bytes.equals(first.bytes)).toBe(true);
  for (const name of ['content-type', 'content-length', 'etag']) {
    expect([name, replay.headers.get(name)]).toEqual([name, first.headers.get(name)]);
  }
}

describe.each(PLATFORMS)('a JSON replay on %s', (platform) => {
  let t: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    t = await start(platform);
  });
  afterAll(() => t.app.close());

  it('is the first response byte for byte, and the handler ran once', async () => {
    const controller = t.app.get(OrdersController);
    const runs = controller.runs;
    const { first, replay, serialised } = await firstAndReplay(t, '/orders');
    expect(first.status).toBe(201);
    expect(first.json()).toEqual(ORDER);
    expectSameResponse(first, replay);
    expect(controller.runs).toBe(runs + 1);
    // On Express, the replay sent the stored text; Fastify serialised the value again.
    expect(serialised).toEqual(platform === 'express' ? [2, 0] : [2, 1]);
  });

  it('of a number is sent as the first was (text, not JSON)', async () => {
    const { first, replay } = await firstAndReplay(t, '/orders/count');
    expect(first.text).toBe('42');
    expectSameResponse(first, replay);
  });

  it('of a redirect goes where the first went', async () => {
    const key = newKey();
    const first = await post(t.url, '/orders/moved', { key, redirect: 'manual' });
    const replay = await post(t.url, '/orders/moved', { key, redirect: 'manual' });
    expect(first.status).toBe(302);
    expect(first.headers.get('location')).toBe('/orders/ord_1');
    expect(replay.status).toBe(302);
    expect(replay.headers.get('location')).toBe('/orders/ord_1');
  });

  it('keeps a Content-Type the route sets', async () => {
    const { first, replay } = await firstAndReplay(t, '/orders/typed');
    expect(first.headers.get('content-type')).toContain('application/vnd.api+json');
    expectSameResponse(first, replay);
  });
});

describe('a JSON replay on Express, where something needs the value', () => {
  const apps: INestApplication[] = [];
  afterAll(() => Promise.all(apps.map((app) => app.close())));
  const started = async (configure: (app: INestApplication) => void) => {
    const t = await start('express', configure);
    apps.push(t.app);
    return t;
  };

  it.each([
    ['json spaces', 2, '\n  "id": "ord_1"'],
    ['json escape', true, '\\u003cb\\u003e'],
    [
      'json replacer',
      (name: string, value: unknown) => (name === 'total' ? '12.50' : value),
      '"12.50"',
    ],
  ])("is serialised again with the app's %s", async (setting, value, sign) => {
    const t = await started((app) =>
      (app as NestExpressApplication).getHttpAdapter().getInstance().set(setting, value),
    );
    const { first, replay, serialised } = await firstAndReplay(t, '/orders');
    expect(first.text).toContain(sign);
    expectSameResponse(first, replay);
    expect(serialised).toEqual([2, 1]);
  });

  it('goes through a global interceptor that maps it', async () => {
    const t = await started((app) => app.useGlobalInterceptors(new Envelope()));
    const { first, replay, serialised } = await firstAndReplay(t, '/orders');
    expect(first.json()).toEqual({ data: ORDER });
    expectSameResponse(first, replay);
    expect(serialised).toEqual([2, 1]);
  });

  it("reaches a middleware that wraps the response's json()", async () => {
    const logged: unknown[] = [];
    const t = await started((app) =>
      app.use((_req: Request, res: Response, next: NextFunction) => {
        const json = res.json.bind(res);
        res.json = (body: unknown) => (logged.push(body), json(body));
        next();
      }),
    );
    const { first, replay } = await firstAndReplay(t, '/orders');
    expectSameResponse(first, replay);
    expect(logged).toEqual([ORDER, ORDER]);
  });

  it("reaches a res.json() an APM agent or a redaction wrapped on Express's prototype", async () => {
    // As dd-trace wraps express.response.json, and a redaction would: the replay is masked too.
    const seen: unknown[] = [];
    const json = express.response.json;
    express.response.json = function (this: Response, body: unknown) {
      seen.push(body);
      const masked = JSON.parse(JSON.stringify(body), (name: string, value: unknown) =>
        name === 'note' ? '[redacted]' : value,
      );
      return json.call(this, masked);
    };
    try {
      const t = await started(() => {});
      const { first, replay } = await firstAndReplay(t, '/orders');
      expect(first.json()).toEqual({ ...ORDER, note: '[redacted]' });
      expectSameResponse(first, replay);
      expect(seen).toEqual([ORDER, ORDER]);
    } finally {
      express.response.json = json;
    }
  });

  it("reaches a res.json() replaced on the app's response prototype", async () => {
    const t = await started((app) => {
      const proto = (app as NestExpressApplication).getHttpAdapter().getInstance().response;
      const json = proto.json;
      proto.json = function (this: Response, body: unknown) {
        return json.call(this, { data: body, meta: { v: 2 } });
      };
    });
    const { first, replay } = await firstAndReplay(t, '/orders');
    expect(first.json()).toEqual({ data: ORDER, meta: { v: 2 } });
    expectSameResponse(first, replay);
  });

  it("passes Nest's global ClassSerializerInterceptor as text, hiding what it hides", async () => {
    const t = await started((app) =>
      app.useGlobalInterceptors(new ClassSerializerInterceptor(app.get(Reflector))),
    );
    const { first, replay, serialised } = await firstAndReplay(t, '/orders/account');
    expect(first.json()).toEqual({ id: 7, name: 'Ada' });
    expectSameResponse(first, replay);
    expect(serialised).toEqual([2, 0]);
  });
});
