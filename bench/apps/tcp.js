// The TCP message handler under test: a Nest microservice on the TCP transport, patterns `pay`
// (@Idempotent()), `pay.plain` (the plain lane) and `hold`; the key travels in the payload's
// `idempotencyKey` field, as on any transport without headers. Env: see apps/common.js. Prints
// `READY <port> <control port>`.
const { load, LIBRARY, executed, moduleOptions, ready, decorate } = require('./common');
load('reflect-metadata');
const { Controller, Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { MessagePattern, Payload, Transport } = load('@nestjs/microservices');
const { Idempotent, IdempotencyModule } = load(LIBRARY);
const { payment } = require('../payload');
const holds = require('../holds');
const { freePort } = require('../lib/procs');

class BenchConsumer {
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
decorate(BenchConsumer, 'pay', [MessagePattern('pay'), Idempotent()], [Payload()]);
decorate(BenchConsumer, 'payPlain', [MessagePattern('pay.plain')], [Payload()]);
decorate(BenchConsumer, 'hold', [MessagePattern('hold'), Idempotent()], [Payload()]);
Controller()(BenchConsumer);

class AppModule {}
Module({
  imports: [IdempotencyModule.forRoot(moduleOptions())],
  controllers: [BenchConsumer],
})(AppModule);

async function main() {
  const port = await freePort();
  const app = await NestFactory.createMicroservice(AppModule, {
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port },
    logger: ['error'],
  });
  await app.listen();
  await ready(port);
}
main();
