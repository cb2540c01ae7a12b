// The gRPC app under test: a Nest gRPC microservice (unary methods of bench/apps/bench.proto),
// the key in the `idempotency-key` metadata. Env: see apps/common.js. Prints
// `READY <port> <control port>`.
const { join } = require('node:path');
const { load, LIBRARY, executed, moduleOptions, ready, decorate } = require('./common');
load('reflect-metadata');
const { Controller, Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { GrpcMethod, Transport } = load('@nestjs/microservices');
const { Idempotent, IdempotencyModule } = load(LIBRARY);
const { payment } = require('../payload');
const holds = require('../holds');
const { freePort } = require('../lib/procs');

class BenchController {
  pay(request) {
    executed();
    return payment(request.amount);
  }
  payPlain(request) {
    executed();
    return payment(request.amount);
  }
  async hold(request) {
    const { held, completedAt } = await holds.hold(request.key);
    return { held, completed_at: completedAt };
  }
}
decorate(BenchController, 'pay', [GrpcMethod('Bench', 'Pay'), Idempotent()]);
decorate(BenchController, 'payPlain', [GrpcMethod('Bench', 'PayPlain')]);
decorate(BenchController, 'hold', [GrpcMethod('Bench', 'Hold'), Idempotent()]);
Controller()(BenchController);

class AppModule {}
Module({
  imports: [IdempotencyModule.forRoot(moduleOptions())],
  controllers: [BenchController],
})(AppModule);

async function main() {
  const port = await freePort();
  const app = await NestFactory.createMicroservice(AppModule, {
    transport: Transport.GRPC,
    options: {
      package: 'bench',
      protoPath: join(__dirname, 'bench.proto'),
      url: `127.0.0.1:${port}`,
      loader: { keepCase: true },
    },
    logger: ['error'],
  });
  await app.listen();
  await ready(port);
}
main();
