import {
  Body,
  CallHandler,
  ClassSerializerInterceptor,
  Controller,
  ExecutionContext,
  DynamicModule,
  Get,
  Header,
  HttpCode,
  HttpException,
  Injectable,
  INestApplication,
  Module,
  NestInterceptor,
  Post,
  Req,
  Res,
  SerializeOptions,
  Sse,
  StreamableFile,
  UseInterceptors,
  ValidationPipe,
} from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Exclude, Expose } from 'class-transformer';
import { IsInt, IsPositive, IsString } from 'class-validator';
import { Readable } from 'node:stream';
import { interval, map, Observable, retry, take } from 'rxjs';
import {
  Idempotent,
  IdempotencyEvent,
  IdempotencyModule,
  IdempotencyModuleOptions,
} from '../../lib';
import { listen } from './http-app';

export type Platform = 'express' | 'fastify';
export const PLATFORMS: Platform[] = ['express', 'fastify'];

/** A promise with its resolve function, to let a test hold a handler open and release it. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * The side channel the tests count handler executions through (never the module itself), and the
 * gates that hold a slow handler open until the test lets it finish.
 */
@Injectable()
export class Executions {
  readonly counts = new Map<string, number>();
  readonly events: IdempotencyEvent[] = [];
  /** Release functions of held handlers that no test has taken yet, and tests waiting for one. */
  private held: (() => void)[] = [];
  private waiters: ((release: () => void) => void)[] = [];

  count(name: string): number {
    return this.counts.get(name) ?? 0;
  }

  hit(name: string): number {
    const n = this.count(name) + 1;
    this.counts.set(name, n);
    return n;
  }

  /** Called by a slow handler: announces it started, then waits until the test releases it. */
  async hold(): Promise<void> {
    const gate = deferred();
    const waiter = this.waiters.shift();
    if (waiter) waiter(gate.resolve);
    else this.held.push(gate.resolve);
    await gate.promise;
  }

  /** Resolves when the next slow handler has started, with the function that lets it finish. */
  nextStarted(): Promise<() => void> {
    const release = this.held.shift();
    if (release) return Promise.resolve(release);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  ofType(type: IdempotencyEvent['type']): IdempotencyEvent[] {
    return this.events.filter((event) => event.type === type);
  }

  private listeners: (() => void)[] = [];

  /** The onEvent listener: records the event and wakes the tests waiting for it. */
  record(event: IdempotencyEvent): void {
    this.events.push(event);
    for (const listener of [...this.listeners]) listener();
  }

  /**
   * Resolves once `count` more events of `type` have been recorded than there are now; rejects
   * after `timeoutMs`, so a missing event fails the test (and its cleanup still runs).
   */
  waitFor(type: IdempotencyEvent['type'], count = 1, timeoutMs = 10_000): Promise<void> {
    const target = this.ofType(type).length + count;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.listeners = this.listeners.filter((l) => l !== listener);
        reject(new Error(`expected ${count} more '${type}' event(s) within ${timeoutMs} ms`));
      }, timeoutMs);
      const listener = () => {
        if (this.ofType(type).length < target) return;
        this.listeners = this.listeners.filter((l) => l !== listener);
        clearTimeout(timer);
        resolve();
      };
      this.listeners.push(listener);
    });
  }
}

/** Subscribes again after an error, as `retry()` does: the request is then answered anew. */
@Injectable()
export class RetryInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(retry({ count: 50, delay: 20 }));
  }
}

/** A class with a field class-transformer's serializer hides. */
export class Account {
  constructor(
    readonly id: number,
    readonly name: string,
    password: string,
  ) {
    this.password = password;
  }

  @Exclude()
  password: string;

  @Expose({ groups: ['admin'] })
  note = 'internal';
}

export class CreatePaymentDto {
  @IsInt()
  @IsPositive()
  amount!: number;

  @IsString()
  currency!: string;
}

@Controller('payments')
export class PaymentsController {
  constructor(private readonly executions: Executions) {}

  @Post()
  @Idempotent()
  @Header('Location', '/payments/42')
  @Header('ETag', '"v1"')
  create(
    @Body() body: Record<string, unknown>,
    @Res({ passthrough: true }) res: { header(name: string, value: string): unknown },
  ) {
    const n = this.executions.hit('create');
    res.header('Set-Cookie', 'session=secret');
    res.header('X-Not-Replayed', 'yes');
    res.header('Cache-Control', 'no-store');
    return { id: n, ...body, nested: { b: 2, a: [1, 'two', null] }, unicode: 'héllo ✓' };
  }

  @Post('validated')
  @Idempotent()
  validated(@Body() dto: CreatePaymentDto) {
    return { id: this.executions.hit('validated'), ...dto };
  }

  @Post('text')
  @Idempotent()
  text() {
    return `plain text #${this.executions.hit('text')}`;
  }

  @Post('binary')
  @Idempotent()
  @Header('Content-Type', 'application/octet-stream')
  binary() {
    return Buffer.from([0, 1, 2, 255, 254, this.executions.hit('binary')]);
  }

  @Post('empty')
  @Idempotent()
  @HttpCode(204)
  empty() {
    this.executions.hit('empty');
  }

  @Post('slow')
  @Idempotent()
  async slow(@Body() body: Record<string, unknown>) {
    const n = this.executions.hit('slow');
    if (n === 1 || body.hold) await this.executions.hold();
    return { run: n };
  }

  @Post('wait')
  @Idempotent({ onConflict: 'wait' })
  async wait(@Body() body: { hold?: boolean; failFirst?: string }) {
    const n = this.executions.hit('wait');
    if (body.hold) await this.executions.hold();
    // Fails the first run for each `failFirst` tag.
    if (body.failFirst && this.executions.hit(`wait:${body.failFirst}`) === 1) {
      throw new HttpException({ reason: 'card declined' }, 402);
    }
    return { run: n };
  }

  @Post('wait-briefly')
  @Idempotent({ onConflict: 'wait', waitTimeout: 200 })
  async waitBriefly() {
    const n = this.executions.hit('wait-briefly');
    await this.executions.hold();
    return { run: n };
  }

  /** About 100 KB of realistic JSON: orders with varied values. */
  @Post('report')
  @Idempotent()
  report() {
    this.executions.hit('report');
    return Array.from({ length: 560 }, (_, i) => ({
      id: `ord_${(i * 7919).toString(36)}`,
      customer: { id: 1000 + (i % 97), email: `customer${i % 97}@example.com` },
      lines: [{ sku: `SKU-${i % 31}`, quantity: (i % 5) + 1, price: ((i * 37) % 10_000) / 100 }],
      status: ['paid', 'pending', 'shipped'][i % 3],
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(),
    }));
  }

  @Post('short-lease')
  @Idempotent({ lockTtl: 1_000 })
  async shortLease() {
    const n = this.executions.hit('short-lease');
    await this.executions.hold();
    return { run: n };
  }

  @Post('fail')
  @Idempotent()
  fail() {
    const n = this.executions.hit('fail');
    if (n === 1) throw new HttpException({ reason: 'card declined', attempt: n }, 402);
    if (n === 2) throw new Error('boom');
    return { run: n };
  }

  @Post('required')
  @Idempotent({ required: true })
  required() {
    return { run: this.executions.hit('required') };
  }

  @Post('no-fingerprint')
  @Idempotent({ fingerprint: false })
  noFingerprint() {
    return { run: this.executions.hit('no-fingerprint') };
  }

  @Post('file')
  @Idempotent()
  file() {
    this.executions.hit('file');
    return new StreamableFile(Readable.from([Buffer.from('file body')]));
  }

  @Post('raw')
  @Idempotent()
  raw(@Res() res: { status(code: number): { send(body: string): void } }) {
    this.executions.hit('raw');
    res.status(200).send('raw body');
  }

  // Tests bind RetryInterceptor globally: outside @Idempotent(), which is outermost on its route.
  @Post('retried')
  @Idempotent()
  async retried() {
    const n = this.executions.hit('retried');
    if (n === 1) await this.executions.hold();
    return { run: n };
  }

  // ClassSerializerInterceptor outside @Idempotent(), as a global one would be.
  @Post('account')
  @Idempotent()
  @UseInterceptors(ClassSerializerInterceptor)
  account() {
    return new Account(this.executions.hit('account'), 'alice', 'hunter2');
  }

  // Bound inside @Idempotent() (listed above it): what is stored is already serialised.
  @Post('wrapped-account')
  @UseInterceptors(ClassSerializerInterceptor)
  @Idempotent()
  wrappedAccount() {
    return { account: new Account(this.executions.hit('wrapped-account'), 'alice', 'hunter2') };
  }

  @Post('accounts')
  @Idempotent()
  @UseInterceptors(ClassSerializerInterceptor)
  @SerializeOptions({ groups: ['admin'] })
  accounts() {
    const run = this.executions.hit('accounts');
    return [new Account(run, 'alice', 'hunter2'), new Account(run + 1, 'bob', 'letmein')];
  }

  @Post('web-stream')
  @Idempotent()
  webStream() {
    this.executions.hit('web-stream');
    return new Blob(['web stream body']).stream();
  }

  @Post('nothing')
  @Idempotent()
  nothing() {
    this.executions.hit('nothing');
    return null;
  }

  @Post('bytes')
  @Idempotent()
  bytes() {
    // A typed array over part of a larger buffer, as encoders hand them out.
    const buffer = new Uint8Array([9, 9, 104, 105, this.executions.hit('bytes'), 9]);
    return buffer.subarray(2, 5);
  }

  @Post('date')
  @Idempotent()
  date() {
    this.executions.hit('date');
    return new Date(0);
  }

  @Post('big')
  @Idempotent({ maxResponseBytes: 100 })
  big() {
    return { run: this.executions.hit('big'), padding: 'x'.repeat(200) };
  }

  @Post('sized')
  @Idempotent({ maxResponseBytes: 100 })
  sized(@Body() body: { size: number }) {
    return { run: this.executions.hit('sized'), padding: 'x'.repeat(body.size) };
  }

  @Post('tenant')
  @Idempotent({ scope: (ctx) => ctx.switchToHttp().getRequest().headers['x-tenant'] })
  tenant(@Req() req: { headers: Record<string, string> }) {
    return { run: this.executions.hit('tenant'), tenant: req.headers['x-tenant'] };
  }

  @Post('custom-key')
  @Idempotent({ key: (ctx) => ctx.switchToHttp().getRequest().headers['x-request-id'] })
  customKey() {
    return { run: this.executions.hit('custom-key') };
  }

  @Post('plain')
  plain() {
    return { run: this.executions.hit('plain') };
  }

  @Get(':id')
  find() {
    return { run: this.executions.hit('find') };
  }
}

@Controller('orders')
@Idempotent({ required: true })
export class OrdersController {
  constructor(private readonly executions: Executions) {}

  @Post()
  create() {
    return { order: this.executions.hit('orders.create') };
  }

  @Post('draft')
  @Idempotent({ required: false })
  draft() {
    return { draft: this.executions.hit('orders.draft') };
  }

  // A stream in an idempotent class is left alone (@Idempotent() on the route itself fails at boot).
  @Sse('events')
  events(): Observable<{ data: number }> {
    this.executions.hit('events');
    return interval(5).pipe(
      take(3),
      map((i) => ({ data: i + 1 })),
    );
  }
}

export interface TestApp {
  app: INestApplication;
  url: string;
  executions: Executions;
  close(): Promise<void>;
}

/** Boots the test controllers on a real HTTP server (Express or Fastify) on a free port. */
export async function startTestApp(
  platform: Platform,
  options: IdempotencyModuleOptions | ((executions: Executions) => DynamicModule),
  /** Runs before the app listens: global interceptors, say. */
  configure?: (app: INestApplication) => void,
): Promise<TestApp> {
  const executions = new Executions();
  const idempotency =
    typeof options === 'function'
      ? options(executions)
      : IdempotencyModule.forRoot({
          ...options,
          onEvent: (event) => {
            executions.record(event);
            options.onEvent?.(event);
          },
        });
  @Module({
    imports: [idempotency],
    controllers: [PaymentsController, OrdersController],
    providers: [{ provide: Executions, useValue: executions }],
  })
  class AppModule {}

  const { app, url } = await listen(platform, AppModule, (created) => {
    // Fastify parses text/plain itself; Express needs a parser to put it in the fingerprint.
    if (platform === 'express') (created as NestExpressApplication).useBodyParser('text');
    created.useGlobalPipes(new ValidationPipe({ whitelist: true }));
    configure?.(created);
  });
  return { app, url, executions, close: () => app.close() };
}

/** POST helper returning status, headers and raw bytes. */
export async function post(
  url: string,
  path: string,
  options: {
    key?: string;
    body?: unknown;
    headers?: Record<string, string>;
    signal?: AbortSignal;
    /** `'manual'`: a redirect is answered, not followed. */
    redirect?: 'follow' | 'manual' | 'error';
  } = {},
): Promise<{ status: number; headers: Headers; bytes: Buffer; json: () => unknown; text: string }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers['Idempotency-Key'] = options.key;
  let body: string | undefined;
  if (options.body !== undefined) {
    headers['Content-Type'] ??= 'application/json';
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  }
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers,
    body,
    signal: options.signal,
    redirect: options.redirect,
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const text = bytes.toString('utf8');
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    text,
    json: () => JSON.parse(text),
  };
}
