import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyOperatorPageModule,
  IdempotencyRecords,
  IdempotencyService,
  Idempotent,
} from '../../lib';
import { listen } from '../support/http-app';
import { launchChromium, OperatorAuthModule, OperatorsOnly } from '../support/operator-page';
import { World } from '../support/resumable';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { cleanUpPrefix, testRedisUrl, uniquePrefix } from '../support/redis';
import { type Platform, post } from '../support/test-app';

const XSS_KEY = '<img src=x onerror=alert(1)>';

/** A resumable order of four steps, as the issue's: a row, a charge, an e-mail, an event. */
@Controller()
class OrdersController {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly world: World,
  ) {}

  @Post('orders')
  @Idempotent({ resumable: true, scope: 'public' })
  async create(@Body() body: { item: string }) {
    const { idempotency: steps, world } = this;
    const order = await steps.step('create order', async () => {
      await world.enter('order');
      return world.insertOrder(body.item);
    });
    await steps.step('charge card', async () => {
      await world.enter('charge');
      world.effect('charge');
    });
    await steps.step('send e-mail', async () => {
      await world.enter('email');
      world.effect('email');
    });
    return { order: order.id };
  }
}

/**
 * Where `OPERATOR_PAGE_SCREENSHOT` says to keep the list's screenshot (docs/operator-page.png
 * for the docs); without it the screenshot is taken and checked, not kept.
 */
const SCREENSHOT = process.env.OPERATOR_PAGE_SCREENSHOT;

const redisPrefix = uniquePrefix('operator-page');
const postgresTable = uniqueTable('operator_page');
const mysqlTable = uniqueMysqlTable('operator_page');

/**
 * Every store, each on one platform (both on the memory store): the page reads what
 * IdempotencyRecords lists, so what differs is the store, and the platform only for the form.
 */
const CASES: [Platform, string, () => IdempotencyModuleOptions][] = [
  ['express', 'memory', () => ({ keyPrefix: `page-${randomUUID().slice(0, 8)}:` })],
  ['fastify', 'memory', () => ({ keyPrefix: `page-${randomUUID().slice(0, 8)}:` })],
  ['fastify', 'Redis', () => ({ redis: testRedisUrl(), keyPrefix: redisPrefix })],
  [
    'express',
    'PostgreSQL',
    () => ({
      postgres: { connectionString: testPostgresUrl(), table: postgresTable, ensureSchema: true },
    }),
  ],
  [
    'fastify',
    'MariaDB',
    () => ({ mysql: { connectionString: testMysqlUrl(), table: mysqlTable, ensureSchema: true } }),
  ],
];

describe('the operator page in Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await cleanUpPrefix(redisPrefix);
    const postgres = await testPool();
    await dropTable(postgres, postgresTable).finally(() => postgres.end());
    const mysql = await testMysqlPool();
    await dropMysqlTable(mysql, mysqlTable).finally(() => mysql.end());
  });

  describe.each(CASES)('on %s, the %s store', (platform, store, options) => {
    const world = new World();
    let app: INestApplication;
    let url: string;
    let context: BrowserContext;
    let page: Page;
    /** What the page made the browser do that it must never: dialogs, CSP or console errors. */
    const incidents: string[] = [];

    const order = async (key: string, failAt?: string) => {
      if (failAt) world.failNext(failAt);
      return (await post(url, '/orders', { key, body: { item: 'book' } })).status;
    };

    beforeAll(async () => {
      @Module({
        imports: [
          IdempotencyModule.forRoot(options()),
          IdempotencyOperatorPageModule.register({
            path: '/ops/idempotency',
            guards: [OperatorsOnly],
            imports: [OperatorAuthModule],
          }),
          // A second page, two records a page: registrations do not share a path.
          IdempotencyOperatorPageModule.register({
            path: '/ops/paged',
            guards: [OperatorsOnly],
            imports: [OperatorAuthModule],
            pageSize: 2,
          }),
        ],
        controllers: [OrdersController],
        providers: [{ provide: World, useValue: world }],
      })
      class AppModule {}
      ({ app, url } = await listen(platform, AppModule));
      // Half done the honest way: the third step throws, after the first two were recorded.
      for (const key of ['order-1001', 'order-1002', XSS_KEY]) {
        expect(await order(key, 'email')).toBe(502);
      }
      for (const key of ['order-0998', 'order-0999']) expect(await order(key)).toBe(201);
      context = await browser.newContext({
        extraHTTPHeaders: { 'x-operator': 'operator-token' },
        viewport: { width: 1180, height: 640 },
      });
      page = await context.newPage();
      page.setDefaultTimeout(5_000); // a missing element fails in seconds, not at Jest's timeout
      page.on('dialog', (dialog) => {
        incidents.push(`dialog: ${dialog.message()}`);
        void dialog.dismiss();
      });
      page.on('console', (message) => {
        if (message.type() === 'error') incidents.push(`console: ${message.text()}`);
      });
      page.on('pageerror', (error) => incidents.push(`page error: ${error.message}`));
    });
    afterAll(async () => {
      await context?.close();
      await app?.close();
    });

    const rowOf = (key: string) => page.locator('tbody tr', { hasText: key });

    it('lists the half-done orders with their steps, the XSS key as text, nothing run', async () => {
      const shown = await page.goto(`${url}/ops/idempotency?state=half_done`);
      // 501 while a store cannot list records: its page says so, and the test stops here.
      expect([shown?.status(), shown?.status() === 200 || (await shown?.text())]).toEqual([
        200,
        true,
      ]);
      expect(await page.locator('.tab.current').innerText()).toMatch(/Half done\s*3/);
      expect(await page.locator('.tab.completed .n').innerText()).toBe('2');
      const xss = rowOf(XSS_KEY);
      expect(await xss.locator('td.key').innerText()).toBe(XSS_KEY);
      expect(await xss.locator('.steps li').allInnerTexts()).toEqual([
        'create order',
        'charge card',
      ]);
      expect(await rowOf('order-1001').locator('td').nth(1).innerText()).toBe('POST /orders');
      expect(await page.locator('img, script').count()).toBe(0);
      // The stylesheet applies (its hash is the one the CSP allows) and nothing was refused.
      const color = 'getComputedStyle(document.querySelector("header")).color';
      expect(await page.evaluate(color)).toBe('rgb(255, 255, 255)');
      expect(incidents).toEqual([]);

      const png = await page.screenshot({ fullPage: true });
      expect(png.subarray(1, 4).toString()).toBe('PNG');
      if (SCREENSHOT && store === 'memory' && platform === 'express') {
        await writeFile(resolve(SCREENSHOT), png);
      }
    });

    it('filters by route and shows one record with its steps', async () => {
      await page.goto(`${url}/ops/idempotency?state=half_done`);
      await page.fill('input[name=route]', 'POST /elsewhere');
      await page.click('button[type=submit]');
      expect(page.url()).toContain('route=POST+%2Felsewhere');
      expect(await page.locator('main').innerText()).toContain('No half done records match');

      await page.goto(`${url}/ops/idempotency?state=half_done&route=POST%20%2Forders`);
      expect(await page.locator('tbody tr').count()).toBe(3);
      await rowOf('order-1002').locator('td.key a').click();
      expect(await page.locator('dl').innerText()).toMatch(/Half done[\s\S]*create order/);
      expect(incidents).toEqual([]);
    });

    it('pages through a list with its cursor, keeping the filters', async () => {
      await page.goto(`${url}/ops/paged?state=completed&order=oldest`);
      expect(await page.locator('td.key').allInnerTexts()).toEqual(['order-0998', 'order-0999']);
      expect(await page.locator('a[rel=next]').count()).toBe(0);
      await page.goto(`${url}/ops/paged?state=half_done&order=oldest`);
      const first = await page.locator('td.key').allInnerTexts();
      expect(first).toHaveLength(2);
      await page.click('a[rel=next]');
      expect(page.url()).toMatch(/\/ops\/paged\?state=half_done&order=oldest&cursor=/);
      const second = await page.locator('td.key').allInnerTexts();
      expect([...first, ...second].sort()).toEqual(['order-1001', 'order-1002', XSS_KEY].sort());
      expect(await page.locator('a[rel=next]').count()).toBe(0);
      await page.getByRole('link', { name: 'First page' }).click();
      expect(await page.locator('td.key').allInnerTexts()).toEqual(first);
    });

    it('deletes a record only after the confirmation, and then it is gone', async () => {
      const records = app.get(IdempotencyRecords);
      const [listed] = (
        await records.list({ state: 'half_done', route: 'POST /orders' })
      ).items.filter((item) => item.key === 'order-1001');
      await page.goto(`${url}/ops/idempotency?state=half_done`);
      await rowOf('order-1001').getByRole('link', { name: 'Delete…' }).click();
      expect(await page.locator('h2').innerText()).toBe('Delete this record?');
      // Still there while the operator reads the confirmation.
      expect(await records.inspect(listed)).toMatchObject({ state: 'absent', steps: [{}, {}] });

      await page.getByRole('button', { name: 'Delete' }).click();
      await page.waitForURL(/done=deleted/);
      expect(await page.locator('.notice').innerText()).toBe('The record was deleted.');
      expect(await rowOf('order-1001').count()).toBe(0);
      expect(await page.locator('.tab.current .n').innerText()).toBe('2');
      expect(await records.inspect(listed)).toEqual({ state: 'absent' });
      expect(incidents).toEqual([]);
    });

    it('shows nothing to a browser without a login: 401, no record', async () => {
      const stranger = await browser.newContext();
      try {
        const visit = await (
          await stranger.newPage()
        ).goto(`${url}/ops/idempotency?state=half_done`);
        expect(visit?.status()).toBe(401);
        expect(await visit?.text()).not.toContain('order-1002');
      } finally {
        await stranger.close();
      }
    });
  });
});
