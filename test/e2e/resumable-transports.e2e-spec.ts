import { Controller } from '@nestjs/common';
import { Args, Int, Mutation, Query, Resolver } from '@nestjs/graphql';
import { GrpcMethod, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { GraphQLError } from 'graphql';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { IdempotencyService, Idempotent, MemoryIdempotencyStore } from '../../lib';
import { startGraphqlApp } from '../support/graphql-app';
import { startGrpcApp } from '../support/grpc-app';
import { startConsumer, transportSetup } from '../support/microservice-app';

/** Calls of each step's function, across the transports (each test uses its own names). */
const ran = new Map<string, number>();
const hit = (name: string) => {
  ran.set(name, (ran.get(name) ?? 0) + 1);
  return ran.get(name)!;
};
/** The step whose function fails the next time it runs. */
let failNext: string | undefined;
const failing = (name: string) => {
  const fails = failNext === name;
  if (fails) failNext = undefined;
  return fails;
};

@Resolver()
class ResumableResolver {
  constructor(private readonly idempotency: IdempotencyService) {}

  @Query(() => Int)
  placed(): number {
    return ran.get('gql.order') ?? 0;
  }

  @Mutation(() => String)
  @Idempotent({ resumable: true, scope: 'public' })
  async placeOrder(@Args('item') item: string): Promise<string> {
    const order = await this.idempotency.step('order', () => `${item}-${hit('gql.order')}`);
    const charge = await this.idempotency.step('charge', () => {
      hit('gql.charge');
      if (failing('gql.charge')) throw new GraphQLError('provider down');
      return 'ch_1';
    });
    return `${order}/${charge}`;
  }
}

@Controller()
class ResumableGrpcController {
  constructor(private readonly idempotency: IdempotencyService) {}

  @GrpcMethod('Orders', 'Create')
  @Idempotent({ resumable: true })
  async create(request: { item: string }) {
    const id = await this.idempotency.step('order', () => `order-${hit('grpc.order')}`);
    const receipt = await this.idempotency.step('receipt', () => {
      hit('grpc.receipt');
      if (failing('grpc.receipt')) throw new RpcException({ code: 14, message: 'unavailable' });
      return Buffer.from([0, 255, 1]);
    });
    return { id, item: request.item, run: ran.get('grpc.order'), receipt, owner: '' };
  }
}

@Controller()
class ResumableConsumer {
  constructor(private readonly idempotency: IdempotencyService) {}

  @MessagePattern('resumable.order')
  @Idempotent({ resumable: true })
  async order(@Payload() data: { item: string }) {
    const order = await this.idempotency.step('order', () => `${data.item}-${hit('rpc.order')}`);
    const mail = await this.idempotency.step('email', () => {
      hit('rpc.email');
      if (failing('rpc.email')) throw new RpcException('smtp down');
      return 'sent';
    });
    return { order, mail };
  }
}

describe('resumable handlers on other transports', () => {
  it('a GraphQL mutation resumes after its second step failed', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const gql = await startGraphqlApp('apollo', { store }, { resolvers: [ResumableResolver] });
    try {
      const key = randomUUID();
      const mutation = 'mutation { placeOrder(item: "book") }';
      failNext = 'gql.charge';
      const failed = await gql.gql(mutation, { key });
      expect(failed.body.errors?.[0].message).toBe('provider down');
      const done = await gql.gql(mutation, { key });
      expect(done.body).toEqual({ data: { placeOrder: 'book-1/ch_1' } });
      expect([ran.get('gql.order'), ran.get('gql.charge')]).toEqual([1, 2]);
      expect((await gql.gql(mutation, { key })).body).toEqual(done.body);
      expect(ran.get('gql.charge')).toBe(2);
    } finally {
      await gql.close();
      await store.close();
    }
  });

  it('a gRPC method resumes after its second step failed', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const grpc = await startGrpcApp({ store }, [ResumableGrpcController]);
    try {
      const key = randomUUID();
      failNext = 'grpc.receipt';
      await expect(grpc.call('Create', { item: 'book' }, { key })).rejects.toMatchObject({
        code: 14,
      });
      const done = await grpc.call('Create', { item: 'book' }, { key });
      expect(done).toMatchObject({ id: 'order-1', item: 'book', run: 1 });
      expect(Buffer.from(done.receipt)).toEqual(Buffer.from([0, 255, 1]));
      expect([ran.get('grpc.order'), ran.get('grpc.receipt')]).toEqual([1, 2]);
      expect(await grpc.call('Create', { item: 'book' }, { key })).toEqual(done);
    } finally {
      await grpc.close();
      await store.close();
    }
  });

  it('a message handler (TCP) resumes after its second step failed', async () => {
    const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
    const setup = await transportSetup('tcp');
    const consumer = await startConsumer(setup, { store }, { controllers: [ResumableConsumer] });
    try {
      const message = { item: 'book', idempotencyKey: randomUUID() };
      const send = () => firstValueFrom(consumer.client.send('resumable.order', message));
      failNext = 'rpc.email';
      await expect(send()).rejects.toMatchObject({ message: 'smtp down' });
      await expect(send()).resolves.toEqual({ order: 'book-1', mail: 'sent' });
      expect([ran.get('rpc.order'), ran.get('rpc.email')]).toEqual([1, 2]);
      await expect(send()).resolves.toEqual({ order: 'book-1', mail: 'sent' });
      expect(ran.get('rpc.email')).toBe(2);
    } finally {
      await consumer.close();
      await store.close();
    }
  });
});
