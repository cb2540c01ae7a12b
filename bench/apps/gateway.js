// The WebSocket gateway under test: a Nest app on @nestjs/platform-socket.io, messages `pay`
// (@Idempotent()), `pay.plain` (the plain lane) and `hold`, each answered through the client's
// ack; the key travels in the message's `idempotencyKey` field, as on any transport without
// headers. Env: see apps/common.js. Prints `READY <port> <control port>`.
const { load, LIBRARY, executed, moduleOptions, ready, decorate } = require('./common');
load('reflect-metadata');
const { Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { IoAdapter } = load('@nestjs/platform-socket.io');
const { MessageBody, SubscribeMessage, WebSocketGateway } = load('@nestjs/websockets');
const { Idempotent, IdempotencyModule } = load(LIBRARY);
const { payment } = require('../payload');
const holds = require('../holds');
const { freePort } = require('../lib/procs');

class BenchGateway {
  pay(data) {
    executed();
    return payment(data.amount);
  }
  payPlain(data) {
    executed();
    return payment(data.amount);
  }
  hold(data) {
    return holds.hold(data.idempotencyKey);
  }
}
decorate(BenchGateway, 'pay', [SubscribeMessage('pay'), Idempotent()], [MessageBody()]);
decorate(BenchGateway, 'payPlain', [SubscribeMessage('pay.plain')], [MessageBody()]);
decorate(BenchGateway, 'hold', [SubscribeMessage('hold'), Idempotent()], [MessageBody()]);
WebSocketGateway()(BenchGateway);

class AppModule {}
Module({
  imports: [IdempotencyModule.forRoot(moduleOptions())],
  providers: [BenchGateway],
})(AppModule);

async function main() {
  const port = await freePort();
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  app.useWebSocketAdapter(new IoAdapter(app));
  await app.listen(port, '127.0.0.1');
  await ready(port);
}
main();
