import { type ServiceError, status } from '@grpc/grpc-js';
import { Controller, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxyFactory,
  MessagePattern,
  Transport,
  type ClientProxy,
} from '@nestjs/microservices';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib';
import { GRAPHQL_SERVERS, startGraphqlApp } from '../support/graphql-app';
import { startGrpcApp } from '../support/grpc-app';
import { findFreePort } from '../support/redis-server';

// A client's mistake (no key where one is required, a key too long) is answered on every
// transport, and never logged by Nest as a server error with a stack trace: over GraphQL a
// refusal used to reach Nest's ExceptionsHandler as an unknown error.

/** Every `Logger#error` call while `run` runs (Nest's own loggers included). */
async function errorsLoggedDuring(run: () => Promise<unknown>): Promise<unknown[][]> {
  const spy = jest.spyOn(Logger.prototype, 'error');
  try {
    await run();
    return spy.mock.calls;
  } finally {
    spy.mockRestore();
  }
}

describe.each(GRAPHQL_SERVERS)('a GraphQL refusal on %s', (server) => {
  it('answers with its code and logs no error', async () => {
    const api = await startGraphqlApp(server, {});
    try {
      const document = 'mutation { createRequired(item: "x") { id } }';
      let codes: unknown[] = [];
      const logged = await errorsLoggedDuring(async () => {
        const missing = await api.gql(document);
        const invalid = await api.gql(document, { key: 'k'.repeat(300) });
        codes = [missing, invalid].map((answer) => answer.body.errors?.[0]?.extensions?.code);
      });
      expect(codes).toEqual(['IDEMPOTENCY_KEY_MISSING', 'IDEMPOTENCY_KEY_INVALID']);
      expect(logged).toEqual([]);
    } finally {
      await api.close();
    }
  });
});

describe('a gRPC refusal', () => {
  it('answers INVALID_ARGUMENT and logs no error', async () => {
    const api = await startGrpcApp({});
    try {
      let failure: ServiceError | undefined;
      const logged = await errorsLoggedDuring(async () => {
        failure = await api.call('CreateRequired', { item: 'x' }).then(
          () => undefined,
          (error: ServiceError) => error,
        );
      });
      expect(failure?.code).toBe(status.INVALID_ARGUMENT);
      expect(logged).toEqual([]);
    } finally {
      await api.close();
    }
  });
});

@Controller()
class RequiredKeyConsumer {
  @MessagePattern('refusals.create')
  @Idempotent({ required: true })
  create(payload: { item: string }) {
    return { item: payload.item };
  }
}

describe('a message handler refusal (TCP)', () => {
  it('answers the error object and logs no error', async () => {
    @Module({ imports: [IdempotencyModule.forRoot({})], controllers: [RequiredKeyConsumer] })
    class ConsumerModule {}
    const port = await findFreePort();
    const options = { host: '127.0.0.1', port };
    const app = await NestFactory.createMicroservice(ConsumerModule, {
      transport: Transport.TCP,
      options,
      logger: false,
    });
    await app.listen();
    const client: ClientProxy = ClientProxyFactory.create({ transport: Transport.TCP, options });
    try {
      let answer: unknown;
      const logged = await errorsLoggedDuring(async () => {
        answer = await firstValueFrom(client.send('refusals.create', { item: 'x' })).catch(
          (error: unknown) => error,
        );
      });
      expect(answer).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING' });
      expect(logged).toEqual([]);
    } finally {
      await client.close();
      await app.close();
    }
  });
});
