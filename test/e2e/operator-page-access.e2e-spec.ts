import { Global, type INestApplication, Module } from '@nestjs/common';
import {
  IdempotencyOperatorPageModule,
  IdempotencyRecords,
  type IdempotencyOperatorPageOptions,
  type IdempotencyRecordListItem,
} from '../../lib';
import { listen } from '../support/http-app';
import { FakeRecords, OperatorAuthModule, OperatorsOnly } from '../support/operator-page';
import { PLATFORMS } from '../support/test-app';

const XSS_KEY = '<img src=x onerror=alert(1)>';

const items = (): IdempotencyRecordListItem[] => [
  {
    ref: 'ops-test:{half-1}',
    key: 'order-secret-7',
    route: 'POST /orders',
    user: { id: 'u-1' },
    keyPrefix: 'ops-test:',
    state: 'half_done',
    ageMs: 65_000,
    steps: [
      { index: 0, name: 'order' },
      { index: 1, name: 'charge' },
    ],
  },
  {
    ref: 'ops-test:{xss}',
    key: XSS_KEY,
    route: 'POST /<script>alert(2)</script>',
    keyPrefix: 'ops-test:',
    state: 'half_done',
    ageMs: 1_000,
    steps: [{ index: 0, name: '"><svg onload=alert(3)>' }],
  },
  {
    ref: 'ops-test:{done}',
    key: 'done-1',
    route: 'POST /orders',
    keyPrefix: 'ops-test:',
    state: 'completed',
    ageMs: 5_000,
    status: 201,
    error: false,
  },
];

/** Boots a page over `records` (in place of IdempotencyRecords) on `platform`. */
async function bootPage(
  platform: (typeof PLATFORMS)[number],
  records: FakeRecords,
  options: Partial<IdempotencyOperatorPageOptions> = {},
  globalPrefix?: string,
): Promise<{ app: INestApplication; url: string }> {
  @Global()
  @Module({
    providers: [{ provide: IdempotencyRecords, useValue: records }],
    exports: [IdempotencyRecords],
  })
  class RecordsModule {}

  @Module({
    imports: [
      RecordsModule,
      IdempotencyOperatorPageModule.register({
        path: '/ops/idempotency',
        guards: [OperatorsOnly],
        imports: [OperatorAuthModule],
        ...options,
      }),
    ],
  })
  class AppModule {}
  return listen(platform, AppModule, (app) => globalPrefix && app.setGlobalPrefix(globalPrefix));
}

const AS_OPERATOR = { 'x-operator': 'operator-token' };
const AS_VIEWER = { 'x-operator': 'viewer-token' };

describe.each(PLATFORMS)('the operator page on %s', (platform) => {
  let app: INestApplication;
  let url: string;
  let records: FakeRecords;
  const page = (path: string, init: RequestInit = {}) =>
    fetch(`${url}/ops/idempotency${path}`, { redirect: 'manual', ...init });

  beforeEach(async () => {
    records = new FakeRecords(items());
    ({ app, url } = await bootPage(platform, records));
  });
  afterEach(() => app.close());

  /**
   * Every route of the page, as a request without the confirmation's cookie (three values each:
   * jest-each takes a callback with more parameters than a row has values for one awaiting done).
   */
  const form = { ref: 'ops-test:{half-1}', token: 'x' };
  const routes: [string, string, RequestInit][] = [
    ['GET', '?state=half_done', {}],
    ['GET', '/record?ref=ops-test:{half-1}', {}],
    ['GET', '/delete?ref=ops-test:{half-1}', {}],
    ['POST', '/delete', { body: new URLSearchParams(form) }],
  ];

  it.each(routes)('answers %s %s without a login with 401, reading nothing', async (m, path, i) => {
    const res = await page(path, { method: m, ...i });
    expect(res.status).toBe(401);
    const body = await res.text();
    expect(body).not.toContain('order-secret-7');
    expect(body).not.toContain('half-1');
    expect(records.calls).toEqual([]);
  });

  it.each(routes)(
    'answers %s %s to a non-operator with 403, reading nothing',
    async (m, path, i) => {
      const res = await page(path, { method: m, headers: AS_VIEWER, ...i });
      expect(res.status).toBe(403);
      expect(await res.text()).not.toContain('order-secret-7');
      expect(records.calls).toEqual([]);
      expect(records.items).toHaveLength(3);
    },
  );

  it('serves operators the counts and the list, with a strict CSP and no caching', async () => {
    const res = await page('?state=half_done', { headers: AS_OPERATOR });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    const csp = Object.fromEntries(
      res.headers
        .get('content-security-policy')!
        .split(';')
        .map((part) => part.trim().split(/\s+/))
        .map(([name, ...values]) => [name, values]),
    );
    expect(csp).toEqual({
      'default-src': ["'none'"],
      'style-src': [expect.stringMatching(/^'sha256-[A-Za-z0-9+/]+=*'$/)],
      'form-action': ["'self'"],
      'frame-ancestors': ["'none'"],
      'base-uri': ["'none'"],
    });
    const body = await res.text();
    // No script of any kind, and nothing from the network.
    expect(body).not.toMatch(/<script|<link|src=["']?https?:|@import/i);
    expect(body).toContain('order-secret-7');
    expect(body).toMatch(/Half done<span class="n">2<\/span>/);
    expect(body).toMatch(/Completed<span class="n">1<\/span>/);
    expect(records.calls.find((call) => call.op === 'list')?.arg).toMatchObject({
      state: 'half_done',
      limit: 50,
      order: 'newest',
    });
  });

  it('escapes every key, route and step name: the XSS key is text', async () => {
    const body = await (await page('?state=half_done', { headers: AS_OPERATOR })).text();
    expect(body).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(body).toContain('POST /&lt;script&gt;alert(2)&lt;/script&gt;');
    expect(body).toContain('&quot;&gt;&lt;svg onload=alert(3)&gt;');
    expect(body).not.toContain('<img');
    expect(body).not.toContain('<svg');
  });

  it('shows a notice for its own names only: ?done=constructor says nothing', async () => {
    const deleted = await (await page('?done=deleted', { headers: AS_OPERATOR })).text();
    expect(deleted).toContain('<p class="notice" role="status">The record was deleted.</p>');
    for (const name of ['constructor', '__proto__', 'toString']) {
      const body = await (await page(`?done=${name}`, { headers: AS_OPERATOR })).text();
      expect(body).not.toContain('class="notice"');
    }
  });

  it('passes the filters to IdempotencyRecords.list and answers a bad one with 400', async () => {
    const query = '?state=stuck&route=POST%20%2Forders&olderThan=15m&newerThan=2h&order=oldest';
    expect((await page(query, { headers: AS_OPERATOR })).status).toBe(200);
    expect(records.calls.find((call) => call.op === 'list')?.arg).toMatchObject({
      state: 'stuck',
      route: 'POST /orders',
      olderThan: 900_000,
      newerThan: 7_200_000,
      order: 'oldest',
    });
    const bad = await page('?state=stuck&olderThan=soon', { headers: AS_OPERATOR });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await bad.text()).toContain('Older than must be milliseconds or a duration string');
  });

  it('deletes only through the confirmation form: the cookie and its token', async () => {
    const ref = 'ops-test:{half-1}';
    const confirm = await page(`/delete?ref=${encodeURIComponent(ref)}&state=half_done`, {
      headers: AS_OPERATOR,
    });
    expect(confirm.status).toBe(200);
    const cookie = confirm.headers.get('set-cookie')!;
    expect(cookie).toMatch(
      /^idempotency_page_csrf=[\w-]{43}; Path=\/ops\/idempotency; Max-Age=900; HttpOnly; SameSite=Strict$/,
    );
    const form = await confirm.text();
    const token = /name="token" value="([\w-]+)"/.exec(form)![1];
    const post = (headers: Record<string, string>, fields: Record<string, string>) =>
      page('/delete', {
        method: 'POST',
        headers: { ...AS_OPERATOR, ...headers },
        body: new URLSearchParams(fields),
      });
    const jar = { cookie: cookie.split(';')[0] };

    // Without the cookie, with another record's token, from another site: refused.
    expect((await post({}, { ref, token })).status).toBe(403);
    const other = { ref: 'ops-test:{done}', token };
    expect((await post(jar, other)).status).toBe(403);
    const crossSite = await post({ ...jar, 'sec-fetch-site': 'cross-site' }, { ref, token });
    expect(crossSite.status).toBe(403);
    expect(await crossSite.text()).toContain('the form was sent from another site');
    const origin = await post({ ...jar, origin: 'https://evil.example' }, { ref, token });
    expect(origin.status).toBe(403);
    expect(records.calls.filter((call) => call.op === 'delete')).toEqual([]);
    expect(records.items).toHaveLength(3);

    const done = await post(
      { ...jar, 'sec-fetch-site': 'same-origin' },
      {
        ref,
        token,
        state: 'half_done',
      },
    );
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe('/ops/idempotency?state=half_done&done=deleted');
    expect(records.calls.filter((call) => call.op === 'delete')).toEqual([
      { op: 'delete', arg: { ref } },
    ]);
    expect(records.items.map((item) => item.ref)).not.toContain(ref);
  });
});

describe.each(PLATFORMS)('the operator page under a global prefix on %s', (platform) => {
  it('links to its own pages under the prefix', async () => {
    const records = new FakeRecords(items());
    const { app, url } = await bootPage(platform, records, {}, 'api');
    try {
      const res = await fetch(`${url}/api/ops/idempotency?state=half_done`, {
        headers: AS_OPERATOR,
      });
      expect(res.status).toBe(200);
      const body = await res.text();
      expect(body).toContain('href="/api/ops/idempotency/record?ref=ops-test%3A%7Bhalf-1%7D"');
      expect(body).toContain('action="/api/ops/idempotency"');
    } finally {
      await app.close();
    }
  });
});
