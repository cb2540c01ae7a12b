import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { TransactionHost } from '@nestjs-cls/transactional';
import { Body, Controller, HttpException, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Args, GraphQLModule, Int, Mutation, Query, Resolver } from '@nestjs/graphql';
import {
  GrpcMethod,
  type MicroserviceOptions,
  RpcException,
  Transport,
} from '@nestjs/microservices';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { GraphQLError } from 'graphql';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Idempotent, IdempotencyService } from '../../../lib';
import { listen } from '../http-app';
import { findFreePort } from '../redis-server';
import { post } from '../test-app';
import { type Answer, DECLINED, declinedAs, type EntryPoint, Ledger } from './harness';
import { socketIoGateway } from './gateway-entry-points';
import { golevelupSubscriber } from './golevelup-entry-points';
import { rmqEventConsumer, rmqMessageConsumer } from './rmq-entry-points';

@Controller('payments')
class PaymentsController {
  constructor(
    private readonly ledger: Ledger,
    private readonly txHost: TransactionHost,
  ) {}

  @Post()
  @Idempotent({ transactional: true })
  async pay(@Body('item') item: string) {
    try {
      return { payment: await this.ledger.pay(this.txHost.tx, item) };
    } catch (error) {
      throw declinedAs(error, (message) => new HttpException(message, 402));
    }
  }
}

/** `@Idempotent({ transactional: true })` on an HTTP route, on Express or Fastify. */
function route(platform: 'express' | 'fastify'): EntryPoint {
  return {
    name: `route on ${platform === 'express' ? 'Express' : 'Fastify'}`,
    declined: `402 ${DECLINED}`,
    fenced: /^409 /,
    async start(imports, ledger) {
      @Module({
        imports: imports(false),
        controllers: [PaymentsController],
        providers: [{ provide: Ledger, useValue: ledger }],
      })
      class RouteModule {}
      const { app, url } = await listen(platform, RouteModule);
      return {
        app,
        async call(key, item) {
          const answer = await post(url, '/payments', { key, body: { item } });
          const ok = answer.status === 201;
          const value = answer.json() as { message?: string };
          return {
            ok,
            value,
            text: ok ? answer.text : `${answer.status} ${value.message}`,
            replayed: answer.headers.get('idempotent-replayed') === 'true',
          };
        },
        close: () => app.close(),
      };
    },
  };
}

/** `IdempotencyService.run(key, fn, { transactional: true })` in an application context. */
const run: EntryPoint = {
  name: 'IdempotencyService.run()',
  declined: `Declined: ${DECLINED}`,
  fenced: /^IdempotencyInProgressError: /,
  async start(imports, ledger) {
    @Module({ imports: imports(false) })
    class RunModule {}
    const app = await NestFactory.createApplicationContext(RunModule, { logger: false });
    await app.init();
    const service = app.get(IdempotencyService);
    const txHost = app.get(TransactionHost);
    return {
      app,
      async call(key, item) {
        try {
          const value = await service.run(
            key,
            async () => ({ payment: await ledger.pay(txHost.tx, item), sent: new Date(0) }),
            { transactional: true },
          );
          return { ok: true, value, text: JSON.stringify(value) };
        } catch (error) {
          const text = `${(error as Error).constructor.name}: ${(error as Error).message}`;
          return { ok: false, value: error, text };
        }
      },
      close: () => app.close(),
    };
  },
};

@Resolver()
class PaymentsResolver {
  constructor(
    private readonly ledger: Ledger,
    private readonly txHost: TransactionHost,
  ) {}

  @Query(() => Int)
  ping(): number {
    return 0;
  }

  @Mutation(() => Int)
  @Idempotent({ transactional: true })
  async pay(@Args('item') item: string): Promise<number> {
    try {
      return await this.ledger.pay(this.txHost.tx, item);
    } catch (error) {
      throw declinedAs(
        error,
        (message) => new GraphQLError(message, { extensions: { code: 'DECLINED' } }),
      );
    }
  }
}

/** A GraphQL mutation, Apollo on Express. */
const graphql: EntryPoint = {
  name: 'GraphQL mutation (Apollo)',
  declined: DECLINED,
  fenced: /./,
  async start(imports, ledger) {
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          includeStacktraceInErrorResponses: false,
        }),
        ...imports(true),
      ],
      providers: [PaymentsResolver, { provide: Ledger, useValue: ledger }],
    })
    class GraphqlModule {}
    const app = await NestFactory.create(GraphqlModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    const url = `${await app.getUrl()}/graphql`.replace('[::1]', '127.0.0.1');
    return {
      app,
      async call(key, item) {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({
            query: 'mutation($item: String!) { pay(item: $item) }',
            variables: { item },
          }),
        });
        const text = await response.text();
        const body = JSON.parse(text) as { data?: unknown; errors?: { message: string }[] };
        return body.errors
          ? { ok: false, value: body, text: body.errors[0].message }
          : { ok: true, value: body.data, text };
      },
      close: () => app.close(),
    };
  },
};

const PROTO = join(mkdtempSync(join(tmpdir(), 'grpc-tx-')), 'payments.proto');
writeFileSync(
  PROTO,
  `syntax = "proto3";
package payments;
service Payments { rpc Pay (PayRequest) returns (Payment); }
message PayRequest { string item = 1; }
message Payment { int32 id = 1; }
`,
);

@Controller()
class PaymentsGrpcController {
  constructor(
    private readonly ledger: Ledger,
    private readonly txHost: TransactionHost,
  ) {}

  @GrpcMethod('Payments', 'Pay')
  @Idempotent({ transactional: true })
  async pay(request: { item: string }): Promise<{ id: number }> {
    try {
      return { id: await this.ledger.pay(this.txHost.tx, request.item) };
    } catch (error) {
      throw declinedAs(
        error,
        (message) => new RpcException({ code: grpc.status.FAILED_PRECONDITION, message }),
      );
    }
  }
}

/** A unary gRPC method. */
const grpcMethod: EntryPoint = {
  name: 'unary gRPC method',
  declined: `FAILED_PRECONDITION ${DECLINED}`,
  fenced: /./,
  async start(imports, ledger) {
    @Module({
      imports: imports(true),
      controllers: [PaymentsGrpcController],
      providers: [{ provide: Ledger, useValue: ledger }],
    })
    class GrpcModule {}
    const address = `127.0.0.1:${await findFreePort()}`;
    const app = await NestFactory.createMicroservice<MicroserviceOptions>(GrpcModule, {
      transport: Transport.GRPC,
      options: { package: 'payments', protoPath: PROTO, url: address },
      logger: false,
    });
    await app.listen();
    const definition = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO));
    const Payments = (definition.payments as grpc.GrpcObject)
      .Payments as grpc.ServiceClientConstructor;
    const client = new Payments(address, grpc.credentials.createInsecure());
    return {
      app,
      call(key, item) {
        const metadata = new grpc.Metadata();
        metadata.set('idempotency-key', key);
        return new Promise<Answer>((resolve) => {
          const pay = (client as unknown as Record<string, (...args: unknown[]) => void>).Pay;
          pay.call(client, { item }, metadata, (error: grpc.ServiceError | null, reply: unknown) =>
            resolve(
              error
                ? { ok: false, value: error, text: `${grpc.status[error.code]} ${error.details}` }
                : { ok: true, value: reply, text: JSON.stringify(reply) },
            ),
          );
        });
      },
      async close() {
        client.close();
        await app.close();
      },
    };
  },
};

/** Every entry point the transactional matrix runs. */
export const ENTRY_POINTS: EntryPoint[] = [
  route('express'),
  route('fastify'),
  run,
  graphql,
  grpcMethod,
  rmqMessageConsumer,
  rmqEventConsumer,
  socketIoGateway,
  golevelupSubscriber,
];
