import { TransactionHost } from '@nestjs-cls/transactional';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IoAdapter } from '@nestjs/platform-socket.io';
import { MessageBody, SubscribeMessage, WebSocketGateway, WsException } from '@nestjs/websockets';
import { io } from 'socket.io-client';
import { Idempotent } from '../../../lib';
import { appUrl } from '../http-app';
import { type Answer, DECLINED, declinedAs, type EntryPoint, Ledger } from './harness';

@WebSocketGateway()
class PaymentsGateway {
  constructor(
    private readonly ledger: Ledger,
    private readonly txHost: TransactionHost,
  ) {}

  @SubscribeMessage('pay')
  @Idempotent({ transactional: true })
  async pay(@MessageBody() body: { item: string; idempotencyKey: string }) {
    try {
      return { id: await this.ledger.pay(this.txHost.tx, body.item) };
    } catch (error) {
      throw declinedAs(error, (message) => new WsException(message));
    }
  }
}

/** A refusal as a gateway answers it: the body every message transport sends. */
interface Refusal {
  status: 'error';
  code?: string;
  message: string;
}

const isRefusal = (value: unknown): value is Refusal =>
  (value as Refusal | null)?.status === 'error';

/**
 * A `@SubscribeMessage()` handler of a socket.io gateway: the ack is the answer, or Nest's
 * `exception` event for the handler's own error (one connection per call, so nothing else
 * answers on it).
 */
export const socketIoGateway: EntryPoint = {
  name: 'socket.io gateway',
  declined: DECLINED,
  fenced: 'IDEMPOTENCY_IN_PROGRESS',
  async start(imports, ledger) {
    @Module({
      imports: imports(false),
      providers: [PaymentsGateway, { provide: Ledger, useValue: ledger }],
    })
    class GatewayModule {}
    const app = await NestFactory.create(GatewayModule, { logger: false });
    app.useWebSocketAdapter(new IoAdapter(app));
    await app.listen(0, '127.0.0.1');
    const url = (await appUrl(app)).replace('http:', 'ws:');
    return {
      app,
      async call(key, item) {
        const socket = io(url, { transports: ['websocket'], forceNew: true });
        try {
          const exception = new Promise<unknown>((resolve) => socket.once('exception', resolve));
          const ack = socket.timeout(20_000).emitWithAck('pay', { item, idempotencyKey: key });
          const value: unknown = await Promise.race([ack, exception]);
          const answer: Answer = isRefusal(value)
            ? { ok: false, value, text: value.code ?? value.message }
            : { ok: true, value, text: JSON.stringify(value) };
          return answer;
        } finally {
          socket.close();
        }
      },
      close: () => app.close(),
    };
  },
};
