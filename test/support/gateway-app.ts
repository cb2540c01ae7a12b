import {
  type CallHandler,
  type ExecutionContext,
  type INestApplication,
  Injectable,
  Module,
  type NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IoAdapter } from '@nestjs/platform-socket.io';
import { WsAdapter } from '@nestjs/platform-ws';
import {
  ConnectedSocket,
  MessageBody,
  type OnGatewayConnection,
  SubscribeMessage,
  WebSocketGateway,
  WsException,
} from '@nestjs/websockets';
import type { IncomingMessage } from 'node:http';
import { map, type Observable } from 'rxjs';
import { io, type Socket } from 'socket.io-client';
import WebSocket from 'ws';
import {
  derivedIdempotencyKey,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyService,
  Idempotent,
} from '../../lib';
import { appUrl } from './http-app';
import { Executions } from './test-app';

/** The two WebSocket platforms of Nest. */
export type GatewayPlatform = 'socket.io' | 'ws';
export const GATEWAY_PLATFORMS: GatewayPlatform[] = ['socket.io', 'ws'];

/** What a gateway's client holds: socket.io's `socket.data`, set on ws clients the same way. */
interface Client {
  data?: { user?: string };
  handshake?: { auth?: { user?: string } };
}

/** A payment message: the key in `idempotencyKey`, as on every transport without headers. */
export interface Charge {
  idempotencyKey?: string;
  amount: number;
  orderId?: string;
  item?: string;
}

/** A handler's own interceptor: stamps what it returns, and counts its runs. */
@Injectable()
export class Stamping implements NestInterceptor {
  constructor(private readonly executions: Executions) {}

  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    this.executions.hit('stamping');
    return next.handle().pipe(map((value) => ({ ...(value as object), stamped: true })));
  }
}

/**
 * The gateway every gateway test talks to, on socket.io or ws: each handler counts its runs in
 * {@link Executions}; `slow` and `slowWait` hold their first run until the test lets go.
 */
@WebSocketGateway()
export class PaymentsGateway implements OnGatewayConnection {
  constructor(
    private readonly executions: Executions,
    private readonly idempotency: IdempotencyService,
  ) {}

  /** The user, as an authentication step would: socket.io's handshake, ws's `?user=`. */
  handleConnection(client: Client, request?: IncomingMessage): void {
    const user =
      client.handshake?.auth?.user ??
      new URL(request?.url ?? '/', 'http://localhost').searchParams.get('user') ??
      undefined;
    if (user === undefined) return;
    client.data ??= {};
    client.data.user = user;
  }

  @SubscribeMessage('charge')
  @Idempotent()
  charge(@MessageBody() data: Charge, @ConnectedSocket() client: Client) {
    const run = this.executions.hit('charge');
    return { charged: data.amount, run, user: client.data?.user ?? null };
  }

  /** Answers with a message to emit (socket.io) or send (ws), not an ack. */
  @SubscribeMessage('notify')
  @Idempotent()
  notify(@MessageBody() data: Charge) {
    return { event: 'charged', data: { amount: data.amount, run: this.executions.hit('notify') } };
  }

  @SubscribeMessage('slow')
  @Idempotent()
  async slow(@MessageBody() data: Charge) {
    const run = this.executions.hit('slow');
    if (run === 1) await this.executions.hold();
    return { charged: data.amount, run };
  }

  @SubscribeMessage('slowWait')
  @Idempotent({ onConflict: 'wait' })
  async slowWait(@MessageBody() data: Charge) {
    const run = this.executions.hit('slowWait');
    if (run === 1) await this.executions.hold();
    return { charged: data.amount, run };
  }

  /** Declines its first run: the key is released, and a retry runs. */
  @SubscribeMessage('fail')
  @Idempotent()
  fail(@MessageBody() data: Charge) {
    const run = this.executions.hit('fail');
    if (run === 1) throw new WsException('card declined');
    return { charged: data.amount, run };
  }

  @SubscribeMessage('byOrder')
  @Idempotent({ key: (context) => context.switchToWs().getData<Charge>().orderId })
  byOrder(@MessageBody() data: Charge) {
    return { charged: data.amount, run: this.executions.hit('byOrder') };
  }

  /** Its own interceptor declared outside @Idempotent(): a replay must not run it again. */
  @SubscribeMessage('stamped')
  @Idempotent()
  @UseInterceptors(Stamping)
  stamped(@MessageBody() data: Charge) {
    return { charged: data.amount, run: this.executions.hit('stamped') };
  }

  /** A downstream key derived from the record: the same on every run of one message. */
  @SubscribeMessage('derive')
  @Idempotent()
  derive() {
    return { key: derivedIdempotencyKey('provider'), run: this.executions.hit('derive') };
  }

  /** Two steps; the second fails the first time: a retry resumes after the first. */
  @SubscribeMessage('order')
  @Idempotent({ resumable: true })
  async order(@MessageBody() data: Charge) {
    const reserved = await this.idempotency.step('reserve', () => ({
      item: data.item,
      run: this.executions.hit('order.reserve'),
    }));
    const paid = await this.idempotency.step('pay', () => {
      if (this.executions.hit('order.pay') === 1) throw new WsException('provider down');
      return `paid-${reserved.run}`;
    });
    return { reserved, paid };
  }
}

/** A running app with its gateway: clients to connect, and what its handlers did. */
export interface GatewayApp {
  app: INestApplication;
  executions: Executions;
  /** A client connected as `user` (none: anonymous); closed by {@link close}. */
  connect(user?: string, options?: Record<string, unknown>): Promise<GatewayClient>;
  close(): Promise<void>;
}

/** A client of either platform, with one way to talk to the gateway. */
export interface GatewayClient {
  /**
   * Sends `event` with `data` and resolves with its answer: socket.io's ack (`emitWithAck`),
   * ws's next message.
   */
  request(event: string, data: unknown): Promise<unknown>;
  /** Sends `event` without asking for an ack. */
  send(event: string, data: unknown): void;
  /** The next message named `event` the gateway sends (socket.io: an emit; ws: `{ event, data }`). */
  next(event: string, timeoutMs?: number): Promise<unknown>;
  /** socket.io's socket itself (undefined on ws). */
  socket?: Socket;
  close(): void;
}

/** Boots {@link PaymentsGateway} on `platform` with `options`, on a free port of 127.0.0.1. */
export async function startGatewayApp(
  platform: GatewayPlatform,
  options: IdempotencyModuleOptions,
): Promise<GatewayApp> {
  const executions = new Executions();
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        ...options,
        onEvent: (event) => executions.record(event),
      }),
    ],
    providers: [PaymentsGateway, { provide: Executions, useValue: executions }],
  })
  class GatewayModule {}
  const app = await NestFactory.create(GatewayModule, { logger: false });
  app.useWebSocketAdapter(platform === 'ws' ? new WsAdapter(app) : new IoAdapter(app));
  await app.listen(0, '127.0.0.1');
  const base = (await appUrl(app)).replace('http:', 'ws:');
  const clients: GatewayClient[] = [];
  return {
    app,
    executions,
    async connect(user, clientOptions = {}) {
      const client =
        platform === 'ws'
          ? await wsClient(`${base}/${user ? `?user=${user}` : ''}`)
          : await ioClient(base, { ...clientOptions, auth: user ? { user } : {} });
      clients.push(client);
      return client;
    },
    async close() {
      clients.forEach((client) => client.close());
      await app.close();
    },
  };
}

/** A socket.io client on the websocket transport, connected. */
async function ioClient(url: string, options: Record<string, unknown>): Promise<GatewayClient> {
  const socket = io(url, { transports: ['websocket'], forceNew: true, ...options });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('connect_error', reject);
  });
  return {
    socket,
    request: (event, data) => socket.timeout(5_000).emitWithAck(event, data),
    send: (event, data) => void socket.emit(event, data),
    next: (event, timeoutMs = 5_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no '${event}' event`)), timeoutMs);
        socket.once(event, (data: unknown) => {
          clearTimeout(timer);
          resolve(data);
        });
      }),
    close: () => void socket.close(),
  };
}

/** A `ws` client, connected: messages go as `{ event, data }`, as Nest's WsAdapter reads them. */
async function wsClient(url: string): Promise<GatewayClient> {
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const nextMessage = (timeoutMs: number, matches: (message: unknown) => boolean) =>
    new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        socket.off('message', listener);
        reject(new Error('no answer'));
      }, timeoutMs);
      const listener = (raw: WebSocket.RawData) => {
        const message: unknown = JSON.parse(raw.toString());
        if (!matches(message)) return;
        clearTimeout(timer);
        socket.off('message', listener);
        resolve(message);
      };
      socket.on('message', listener);
    });
  const send = (event: string, data: unknown) => socket.send(JSON.stringify({ event, data }));
  return {
    request: (event, data) => {
      const answer = nextMessage(5_000, () => true);
      send(event, data);
      return answer;
    },
    send,
    next: async (event, timeoutMs = 5_000) => {
      const message = await nextMessage(
        timeoutMs,
        (m) => (m as { event?: unknown } | null)?.event === event,
      );
      return (message as { data: unknown }).data;
    },
    close: () => socket.close(),
  };
}
