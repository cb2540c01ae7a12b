import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Args,
  Field,
  GraphQLModule,
  Int,
  Mutation,
  ObjectType,
  Query,
  Resolver,
} from '@nestjs/graphql';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  Transport,
  type ClientProxy,
} from '@nestjs/microservices';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib';
import {
  cleanUpPrefix,
  inspectionClient,
  recordKeysUnder,
  testRedisUrl,
  uniquePrefix,
} from '../support/redis';
import { findFreePort } from '../support/redis-server';

// One app serving HTTP, GraphQL and a microservice, one IdempotencyModule, one Redis store: the
// same key sent to each entry point names three operations, whose records never collide (route
// identity covers the context type), and each replays its own response.

const runs = { http: 0, graphql: 0, rpc: 0 };

@ObjectType()
class Charge {
  @Field()
  via!: string;

  @Field(() => Int)
  run!: number;
}

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { via: 'http', run: ++runs.http, amount: body.amount };
  }

  @MessagePattern('charges.create')
  @Idempotent()
  createMessage(@Payload() payload: { amount: number }) {
    return { via: 'rpc', run: ++runs.rpc, amount: payload.amount };
  }
}

@Resolver(() => Charge)
class ChargesResolver {
  @Query(() => Int)
  chargeCount(): number {
    return runs.graphql;
  }

  @Mutation(() => Charge)
  @Idempotent()
  createCharge(@Args('amount', { type: () => Int }) _amount: number): Charge {
    return { via: 'graphql', run: ++runs.graphql };
  }
}

describe('a hybrid app (HTTP + GraphQL + microservice) with one store', () => {
  const prefix = uniquePrefix('hybrid');
  let app: Awaited<ReturnType<typeof NestFactory.create>>;
  let client: ClientProxy;
  let base: string;

  beforeAll(async () => {
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true }),
        IdempotencyModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix }),
      ],
      controllers: [ChargesController],
      providers: [ChargesResolver],
    })
    class HybridModule {}

    const port = await findFreePort();
    app = await NestFactory.create(HybridModule, { logger: false });
    app.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await cleanUpPrefix(prefix);
  });

  const viaHttp = async (key: string) => {
    const response = await fetch(`${base}/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ amount: 5 }),
    });
    return (await response.json()) as { via: string; run: number };
  };
  const viaGraphql = async (key: string) => {
    const response = await fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ query: 'mutation { createCharge(amount: 5) { via run } }' }),
    });
    const body = (await response.json()) as {
      data: { createCharge: { via: string; run: number } };
    };
    return body.data.createCharge;
  };
  const viaRpc = (key: string) =>
    firstValueFrom(
      client.send<{ via: string; run: number }>('charges.create', {
        amount: 5,
        idempotencyKey: key,
      }),
    );

  it('keeps the three entry points apart under one key, each replaying its own', async () => {
    const key = `hybrid-${Date.now()}`;
    const first = [await viaHttp(key), await viaGraphql(key), await viaRpc(key)];
    const again = [await viaHttp(key), await viaGraphql(key), await viaRpc(key)];
    expect(first.map((r) => r.via)).toEqual(['http', 'graphql', 'rpc']);
    expect(first.map((r) => r.run)).toEqual([1, 1, 1]);
    expect(again).toEqual(first);
    expect(runs).toEqual({ http: 1, graphql: 1, rpc: 1 });

    const redis = inspectionClient();
    try {
      expect(await recordKeysUnder(redis, prefix)).toHaveLength(3);
    } finally {
      await redis.quit();
    }
  });
});
