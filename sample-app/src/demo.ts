import { ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { firstValueFrom } from 'rxjs';
import { readConfig } from './config';
import { freePort, SampleApp, startSampleApp } from './sample-app';
import type { Stats } from './stats/stats.service';

/** What one scenario of the demo saw. */
export interface ScenarioReport {
  name: string;
  title: string;
  /** The handler the scenario is about, as `GET /stats` names it (`Controller.method`). */
  handler: string;
  /** Responses per HTTP status ("201": 1, "409": 19), or per reply kind for the microservice. */
  statuses: Record<string, number>;
  /** `Idempotent-Replayed`, `Retry-After` and `Location` values seen ("retry-after: 30": 4). */
  headers: Record<string, number>;
  /** How many times the handler ran during the scenario (from `GET /stats`). */
  executions: number;
  /** The module's outcomes for the handler during the scenario (claimed, replayed, conflict...). */
  outcomes: Record<string, number>;
  /** Runs of each step of a resumable handler during the scenario (`GET /stats`' `step: ...`). */
  steps?: Record<string, number>;
  /** What else the scenario saw, one line each (the operator page's list). */
  notes?: string[];
}

export interface DemoReport {
  url: string;
  tcp: { host: string; port: number };
  store: string;
  scenarios: ScenarioReport[];
  /** `GET /stats` executions at the end: runs per handler since the app started. */
  totals: Record<string, number>;
  /** The operator page's address (user `operator`, password `OPS_PASSWORD`). */
  operatorPage: string;
}

const SHOWN_HEADERS = ['idempotent-replayed', 'retry-after', 'location'];
/** How `GET /stats` names a step's runs. */
const STEP = 'step: ';
/** Outcomes that end one delivery (`claimed` is always followed by one of them). */
const SETTLED = [
  'completed',
  'released',
  'fenced',
  'completion_failed',
  'replayed',
  'conflict',
  'mismatch',
  'store_error',
];

interface HttpResult {
  status: number;
  body: Record<string, unknown>;
}

/** Runs every scenario against a sample app at `url` and returns what it saw. */
export async function runDemo(
  url: string,
  options: { burst?: number; opsPassword?: string } = {},
): Promise<DemoReport> {
  const burst = options.burst ?? 20;
  const operatorPage = `${url}/ops/idempotency`;
  const login = `operator:${options.opsPassword ?? readConfig().opsPassword}`;
  const info = (await getJson(url, '/')) as { store: string; tcp: DemoReport['tcp'] };
  const client = ClientProxyFactory.create({ transport: Transport.TCP, options: info.tcp });
  await client.connect();
  const run = randomUUID().slice(0, 8); // fresh keys on every run, even against a long-lived app
  const key = (name: string) => `demo-${run}-${name}`;
  const payment = { amount: 2500, currency: 'EUR', description: 'Demo order #1' };
  const scenarios: ScenarioReport[] = [];
  const scenario = async (
    name: string,
    title: string,
    handler: string,
    body: (record: Recorder) => Promise<void>,
  ): Promise<void> => {
    const recorder = new Recorder(url);
    const before = await stats(url);
    await body(recorder);
    const after = await stats(url);
    const steps = stepRuns(before, after);
    scenarios.push({
      name,
      title,
      handler,
      statuses: recorder.statuses,
      headers: recorder.headers,
      ...difference(before, after, handler),
      ...(Object.keys(steps).length ? { steps } : {}),
      ...(recorder.notes.length ? { notes: recorder.notes } : {}),
    });
  };

  try {
    let paymentId = '';
    await scenario(
      'burst',
      `${burst} concurrent duplicates of POST /payments`,
      'PaymentsController.create',
      async (r) => {
        const responses = await Promise.all(
          Array.from({ length: burst }, () => r.post('/payments', key('pay'), payment)),
        );
        paymentId = String(responses.find((res) => res.status === 201)?.body.id);
      },
    );
    await scenario(
      'retry',
      'The same request again after it completed',
      'PaymentsController.create',
      async (r) => void (await r.post('/payments', key('pay'), payment)),
    );
    await scenario(
      'mismatch',
      'The same key with another amount',
      'PaymentsController.create',
      async (r) => void (await r.post('/payments', key('pay'), { ...payment, amount: 9900 })),
    );
    await scenario(
      'validation',
      'An invalid body (400), then the corrected body with the same key',
      'PaymentsController.create',
      async (r) => {
        await r.post('/payments', key('fix'), { ...payment, amount: -5 });
        await r.post('/payments', key('fix'), payment);
      },
    );
    await scenario(
      'in-progress',
      '5 concurrent duplicates of the slow POST /reports',
      'ReportsController.create',
      async (r) => {
        const ran = (await stats(url)).executions['ReportsController.create'] ?? 0;
        const first = r.post('/reports', key('report'), { period: 'monthly' });
        // Fire the duplicates once the first one is known to be running.
        await waitFor(url, 'the report to start', (s) => {
          return (s.executions['ReportsController.create'] ?? 0) > ran;
        });
        const duplicates = Array.from({ length: 4 }, () =>
          r.post('/reports', key('report'), { period: 'monthly' }),
        );
        await Promise.all([first, ...duplicates]);
      },
    );
    await scenario(
      'wait',
      "5 concurrent duplicates of the slow POST /reports/wait (onConflict: 'wait')",
      'ReportsController.createAndWait',
      async (r) => {
        const ran = (await stats(url)).executions['ReportsController.createAndWait'] ?? 0;
        const first = r.post('/reports/wait', key('wait'), { period: 'daily' });
        await waitFor(url, 'the report to start', (s) => {
          return (s.executions['ReportsController.createAndWait'] ?? 0) > ran;
        });
        const duplicates = Array.from({ length: 4 }, () =>
          r.post('/reports/wait', key('wait'), { period: 'daily' }),
        );
        await Promise.all([first, ...duplicates]);
      },
    );
    await scenario(
      'tcp-message',
      "The TCP message 'payments.refund' sent twice with one idempotencyKey",
      'PaymentsConsumer.refund',
      async (r) => {
        const command = { paymentId, amount: 1000, idempotencyKey: key('refund') };
        await r.send(client, 'payments.refund', command);
        await r.send(client, 'payments.refund', command);
      },
    );
    const order = await new Recorder(url).post('/orders', key('order'), {
      sku: 'mug',
      quantity: 2,
    });
    await scenario(
      'tcp-event',
      "The TCP event 'order.shipped' emitted twice with one eventId",
      'OrdersConsumer.onShipped',
      async (r) => {
        const event = { eventId: key('shipped'), orderId: order.body.id };
        // Events have no reply: wait until the app has settled each delivery (GET /stats).
        for (let delivery = 1; delivery <= 2; delivery++) {
          const settled = settledCount(await stats(url), 'OrdersConsumer.onShipped');
          await r.emit(client, 'order.shipped', event);
          await waitFor(url, `delivery ${delivery} to settle`, (s) => {
            return settledCount(s, 'OrdersConsumer.onShipped') > settled;
          });
        }
      },
    );
    await scenario(
      'graphql',
      'The GraphQL mutation chargePayment sent twice with one key, then without a key',
      'PaymentsResolver.chargePayment',
      async (r) => {
        const mutation =
          'mutation { chargePayment(amount: 1500, currency: "EUR") { id amount capturedAt } }';
        const first = await r.graphql(mutation, key('graphql'));
        const replay = await r.graphql(mutation, key('graphql'));
        // A replay is the first response's bytes: same id, same capturedAt.
        count(r.statuses, first === replay ? 'identical responses' : 'different responses');
        await r.graphql(mutation);
      },
    );
    await scenario(
      'resumable',
      'A resumable checkout fails at its third step (the mail provider is down), then is retried',
      'CheckoutsController.create',
      async (r) => {
        const checkout = { sku: 'mug', quantity: 2, email: 'ada@example.com' };
        await r.send204('PUT', '/mailer/outage');
        try {
          await r.post('/checkouts', key('checkout'), checkout);
        } finally {
          await r.send204('DELETE', '/mailer/outage');
        }
        // Nobody retried yet: the operator page lists it as half done, with its two steps.
        const listed = `${operatorPage}?state=half_done&route=${encodeURIComponent('POST /checkouts')}`;
        const page = await fetch(listed, {
          headers: { Authorization: `Basic ${Buffer.from(login).toString('base64')}` },
        });
        const text = await page.text();
        r.notes.push(
          page.status === 200 && text.includes(key('checkout'))
            ? 'listed as half done on the operator page'
            : `not listed as half done: the operator page answered ${page.status}`,
        );
        await r.post('/checkouts', key('checkout'), checkout);
      },
    );
    return {
      url,
      tcp: info.tcp,
      store: info.store,
      scenarios,
      totals: handlerRuns((await stats(url)).executions),
      operatorPage,
    };
  } finally {
    await client.close();
  }
}

/** Collects the statuses and headers of one scenario's requests. */
class Recorder {
  readonly statuses: Record<string, number> = {};
  readonly headers: Record<string, number> = {};
  readonly notes: string[] = [];

  constructor(private readonly url: string) {}

  async post(path: string, key: string, body: unknown): Promise<HttpResult> {
    const res = await fetch(`${this.url}${path}`, {
      method: 'POST',
      headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    count(this.statuses, String(res.status));
    for (const name of SHOWN_HEADERS) {
      const value = res.headers.get(name);
      if (value !== null) count(this.headers, `${name}: ${value}`);
    }
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  /** A request the demo makes of the app itself (fault injection), expected to answer 204. */
  async send204(method: 'PUT' | 'DELETE', path: string): Promise<void> {
    const res = await fetch(`${this.url}${path}`, { method });
    if (res.status !== 204) throw new Error(`${method} ${path} answered ${res.status}`);
  }

  /** POST /graphql; counts `data` or each error's `extensions.code`; returns the raw body. */
  async graphql(query: string, key?: string): Promise<string> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (key !== undefined) headers['Idempotency-Key'] = key;
    const res = await fetch(`${this.url}/graphql`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ query }),
    });
    const text = await res.text();
    const body = JSON.parse(text) as { errors?: { extensions?: { code?: string } }[] };
    for (const error of body.errors ?? []) count(this.statuses, `error ${error.extensions?.code}`);
    if (!body.errors) count(this.statuses, 'data');
    return text;
  }

  async send(client: ClientProxy, pattern: string, data: unknown): Promise<void> {
    try {
      await firstValueFrom(client.send(pattern, data));
      count(this.statuses, 'reply');
    } catch (error) {
      count(this.statuses, `error ${(error as { code?: string }).code ?? 'from the handler'}`);
    }
  }

  async emit(client: ClientProxy, pattern: string, data: unknown): Promise<void> {
    await firstValueFrom(client.emit(pattern, data), { defaultValue: undefined });
    count(this.statuses, 'emitted');
  }
}

/** A readable version of the report. */
export function formatReport(report: DemoReport): string {
  const pairs = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([name, n]) => `${name} ×${n}`)
      .join(', ') || 'none';
  const lines = [
    `Idempotency demo against ${report.url} (TCP ${report.tcp.host}:${report.tcp.port})`,
    `Store: ${report.store}`,
    '',
  ];
  report.scenarios.forEach((s, i) => {
    lines.push(`${i + 1}. ${s.name}: ${s.title}`);
    lines.push(`   seen:     ${pairs(s.statuses)}`);
    if (Object.keys(s.headers).length > 0) lines.push(`   headers:  ${pairs(s.headers)}`);
    lines.push(`   handler:  ${s.handler} ran ${s.executions}× (${pairs(s.outcomes)})`);
    if (s.steps) lines.push(`   steps:    ${pairs(s.steps)}`);
    for (const note of s.notes ?? []) lines.push(`   note:     ${note}`);
  });
  lines.push('', `Handler runs since the app started: ${pairs(report.totals)}`);
  lines.push(
    `Operator page: ${report.operatorPage} (user operator, password from OPS_PASSWORD: "demo" ` +
      'unless set)',
  );
  return lines.join('\n');
}

async function getJson(url: string, path: string): Promise<unknown> {
  const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(2_000) });
  if (!res.ok) throw new Error(`GET ${url}${path} answered ${res.status}`);
  return res.json();
}

function stats(url: string): Promise<Stats> {
  return getJson(url, '/stats') as Promise<Stats>;
}

/** Polls `GET /stats` until `done` holds (bounded): the app's own counters say when to go on. */
async function waitFor(url: string, what: string, done: (stats: Stats) => boolean) {
  const deadline = Date.now() + 5_000;
  while (!done(await stats(url))) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what} (GET /stats)`);
    await sleep(20);
  }
}

function settledCount(stats: Stats, handler: string): number {
  const outcomes = stats.outcomes[handler] ?? {};
  return SETTLED.reduce((sum, type) => sum + (outcomes[type] ?? 0), 0);
}

function difference(before: Stats, after: Stats, handler: string) {
  const outcomes: Record<string, number> = {};
  for (const [type, n] of Object.entries(after.outcomes[handler] ?? {})) {
    const delta = n - (before.outcomes[handler]?.[type] ?? 0);
    if (delta > 0) outcomes[type] = delta;
  }
  const executions = (after.executions[handler] ?? 0) - (before.executions[handler] ?? 0);
  return { executions, outcomes };
}

/** Runs of each step during a scenario, by step name (`GET /stats` counts them as `step: x`). */
function stepRuns(before: Stats, after: Stats): Record<string, number> {
  const runs: Record<string, number> = {};
  for (const [name, n] of Object.entries(after.executions)) {
    if (!name.startsWith(STEP)) continue;
    const delta = n - (before.executions[name] ?? 0);
    if (delta > 0) runs[name.slice(STEP.length)] = delta;
  }
  return runs;
}

/** Handler runs only, without the steps' counters. */
function handlerRuns(executions: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(executions).filter(([name]) => !name.startsWith(STEP)));
}

function count(counts: Record<string, number>, name: string): void {
  counts[name] = (counts[name] ?? 0) + 1;
}

/** `npm run demo`: uses the app at DEMO_URL, or starts one on free ports and stops it after. */
async function main(): Promise<void> {
  const url = process.env.DEMO_URL ?? 'http://127.0.0.1:3000';
  let started: SampleApp | undefined;
  if (!(await isSampleApp(url))) {
    console.log(`No sample app answers at ${url}: starting one for the demo.`);
    const env = { ...process.env, PORT: '0', TCP_PORT: String(await freePort()) };
    started = await startSampleApp(readConfig(env), { logger: ['error'] });
  }
  try {
    console.log(formatReport(await runDemo(started?.url ?? url)));
    // An app the demo started stays up in a terminal, for a look at the operator page.
    if (started && process.stdout.isTTY) {
      console.log('The app the demo started stays up for a look; Ctrl+C stops it.');
      await new Promise((resolve) => process.once('SIGINT', resolve));
    } else if (started) {
      console.log('The app the demo started stops now: `npm start`, then the demo, keeps one up.');
    }
  } finally {
    await started?.close();
  }
}

async function isSampleApp(url: string): Promise<boolean> {
  try {
    const info = (await getJson(url, '/')) as { service?: string };
    return info.service === 'nestjs-idempotency-sample';
  } catch {
    return false;
  }
}

// Run as a CLI (node dist-sample/demo.js), not when a test imports it; `require` is absent in ESM.
if (typeof require !== 'undefined' && require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
