import { HttpModule, HttpService } from '@nestjs/axios';
import { Controller, Get, HttpException, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplication } from '@nestjs/common';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import axios from 'axios';
import { firstValueFrom } from 'rxjs';
import {
  derivedIdempotencyKey,
  Idempotent,
  IdempotencyModule,
  propagateThroughAxios,
  tryDerivedIdempotencyKey,
} from '../../lib';
import { listen } from '../support/http-app';
import { testRedisUrl, uniquePrefix } from '../support/redis';
import { PLATFORMS, post, type Platform } from '../support/test-app';

const SECRET = 'propagated-keys-e2e-secret-0123456789abcdef';

/** A downstream API that records the headers of every request it gets. */
class Downstream {
  readonly received: { method: string; path: string; key: string | undefined }[] = [];
  server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      const headers: IncomingHttpHeaders = request.headers;
      this.received.push({
        method: request.method!,
        path: request.url!,
        key: headers['idempotency-key'] as string | undefined,
      });
      request.resume();
      request.on('end', () => response.end('{}'));
    });
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  keys(): (string | undefined)[] {
    return this.received.map((request) => request.key);
  }
}

const downstream = new Downstream();
/** An axios instance of the app's own (not an HttpService), wrapped by hand. */
const ownAxios = axios.create();
propagateThroughAxios(ownAxios);

/** Whether the next run of /orders fails after its calls (a failure releases the claim). */
let failNext = false;

@Controller()
class OrdersController {
  constructor(private readonly http: HttpService) {}

  @Post('orders')
  @Idempotent({ propagateKeys: true })
  async order() {
    const json = { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } };
    await fetch(`${downstream.url}/charges?attempt=1`, json);
    await fetch(new Request(`${downstream.url}/charges`, json)); // the same endpoint again: #2
    await fetch(`${downstream.url}/status`); // GET: safe, no key
    await fetch(`${downstream.url}/refunds`, { ...json, headers: { 'Idempotency-Key': 'mine' } });
    await firstValueFrom(this.http.post(`${downstream.url}/charges`, {})); // #3
    await firstValueFrom(this.http.put(`${downstream.url}/captures/1`, {}));
    await firstValueFrom(this.http.get(`${downstream.url}/status`));
    await firstValueFrom(
      this.http.post(`${downstream.url}/refunds`, {}, { headers: { 'idempotency-key': 'mine' } }),
    );
    if (failNext) {
      failNext = false;
      throw new HttpException('provider timeout', 502);
    }
    return { charge: derivedIdempotencyKey(`POST ${downstream.url}/charges`) };
  }

  @Post('own-axios')
  @Idempotent({ propagateKeys: true })
  async ownAxios() {
    await ownAxios.post(`${downstream.url}/labels`, {});
    return { label: derivedIdempotencyKey(`POST ${downstream.url}/labels`) };
  }

  @Post('plain')
  @Idempotent()
  async plain() {
    await fetch(`${downstream.url}/charges`, { method: 'POST', body: '{}' });
    await firstValueFrom(this.http.post(`${downstream.url}/charges`, {}));
    return { derived: tryDerivedIdempotencyKey('charge') ?? null };
  }

  @Get('outside')
  async outside() {
    await fetch(`${downstream.url}/charges`, { method: 'POST', body: '{}' });
    return { derived: tryDerivedIdempotencyKey('charge') ?? null };
  }
}

async function startApp(platform: Platform, prefix: string): ReturnType<typeof listen> {
  @Module({
    imports: [
      HttpModule,
      IdempotencyModule.forRoot({
        redis: testRedisUrl(),
        keyPrefix: prefix,
        scope: 'public',
        keyDerivationSecret: SECRET,
      }),
    ],
    controllers: [OrdersController],
  })
  class AppModule {}
  return listen(platform, AppModule);
}

beforeAll(() => downstream.start());
afterAll(() => downstream.server.close());

// First in this file: no app with propagateKeys has booted yet.
describe('without propagateKeys anywhere', () => {
  it('wraps nothing: global fetch, ClientProxy and the HttpService stay as they were', async () => {
    const { ClientProxy } = await import('@nestjs/microservices');
    const [fetchBefore, sendBefore, emitBefore] = [
      globalThis.fetch,
      ClientProxy.prototype.send,
      ClientProxy.prototype.emit,
    ];
    @Controller()
    class Plain {
      @Post('plain')
      @Idempotent()
      plain() {
        return {};
      }
    }
    @Module({
      imports: [
        HttpModule,
        IdempotencyModule.forRoot({ redis: testRedisUrl(), keyDerivationSecret: SECRET }),
      ],
      controllers: [Plain],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.init();
    try {
      expect(globalThis.fetch).toBe(fetchBefore);
      expect(ClientProxy.prototype.send).toBe(sendBefore);
      expect(ClientProxy.prototype.emit).toBe(emitBefore);
      const interceptors = app.get(HttpService).axiosRef.interceptors.request as unknown as {
        handlers: unknown[];
      };
      expect(interceptors.handlers.filter(Boolean)).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

describe.each(PLATFORMS)('propagateKeys over HTTP (%s)', (platform) => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    ({ app, url } = await startApp(platform, uniquePrefix(`propagated-${platform}`)));
  });
  afterAll(() => app.close());
  beforeEach(() => (downstream.received.length = 0));

  it('sends derived keys on non-safe fetch and HttpService calls: ordinals per endpoint, none on GET, a set key kept', async () => {
    const response = await post(url, '/orders', { key: `order-${platform}-1` });
    expect(response.status).toBe(201);
    const [charge1, charge2, status, refund, charge3, capture, status2, refund2] =
      downstream.keys();
    expect(downstream.received.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /charges?attempt=1',
      'POST /charges',
      'GET /status',
      'POST /refunds',
      'POST /charges',
      'PUT /captures/1',
      'GET /status',
      'POST /refunds',
    ]);
    // The first call to an endpoint: derivedIdempotencyKey('<METHOD> <origin><path>').
    expect(charge1).toBe((response.json() as { charge: string }).charge);
    expect(charge1).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(new Set([charge1, charge2, charge3, capture]).size).toBe(4);
    expect([status, status2]).toEqual([undefined, undefined]);
    expect([refund, refund2]).toEqual(['mine', 'mine']);
  });

  it('a re-run of the same request (after a failure released its claim) sends the same keys', async () => {
    failNext = true;
    const key = `order-${platform}-rerun`;
    expect((await post(url, '/orders', { key })).status).toBe(502);
    const first = downstream.keys();
    downstream.received.length = 0;
    expect((await post(url, '/orders', { key })).status).toBe(201);
    expect(downstream.keys()).toEqual(first);
  });

  it('another client key gets other keys', async () => {
    await post(url, '/orders', { key: `order-${platform}-a` });
    const a = downstream.keys();
    downstream.received.length = 0;
    await post(url, '/orders', { key: `order-${platform}-b` });
    const b = downstream.keys();
    const derived = (keys: (string | undefined)[]) => keys.filter((k) => k && k !== 'mine');
    expect(derived(a)).toHaveLength(4);
    for (const key of derived(a)) expect(derived(b)).not.toContain(key);
  });

  it('an axios instance of your own, wrapped with propagateThroughAxios, sends them too', async () => {
    const response = await post(url, '/own-axios', { key: `own-axios-${platform}` });
    expect(downstream.keys()).toEqual([(response.json() as { label: string }).label]);
  });

  it('sends no key from a route without propagateKeys, a request without a key, or a route that is not idempotent', async () => {
    const plain = await post(url, '/plain', { key: `plain-${platform}` });
    expect(plain.json()).toEqual({ derived: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    await post(url, '/orders'); // no Idempotency-Key: not claimed, nothing derived
    const outside = await fetch(`${url}/outside`);
    expect(await outside.json()).toEqual({ derived: null });
    expect(downstream.keys().filter((key) => key !== 'mine')).toEqual(
      Array(2 + 4 + 1).fill(undefined),
    );
  });
});

describe('propagateKeys at boot', () => {
  it('fails without keyDerivationSecret, naming it', async () => {
    @Controller()
    class Charges {
      @Post('charges')
      @Idempotent({ propagateKeys: true })
      charge() {
        return {};
      }
    }
    @Module({
      imports: [IdempotencyModule.forRoot({ redis: testRedisUrl() })],
      controllers: [Charges],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await expect(app.init()).rejects.toThrow(/propagateKeys.*keyDerivationSecret must be/s);
    await app.close();
  });
});
