import {
  Controller,
  type ExecutionContext,
  Injectable,
  INestApplicationContext,
  Module,
  Post,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { lastValueFrom } from 'rxjs';
import {
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyRecords,
  IdempotencyService,
  Idempotent,
  IdempotentMethod,
  idempotentSqsHandler,
  MemoryIdempotencyStore,
} from '../../lib';
import { resolveModuleOptions } from '../../lib/options';
import { GRAPHQL_SERVERS, startGraphqlApp } from '../support/graphql-app';
import { startGrpcApp } from '../support/grpc-app';
import { listen } from '../support/http-app';
import { PATTERNS, startConsumer, transportSetup, withKey } from '../support/microservice-app';
import { PLATFORMS, post } from '../support/test-app';

// Every entry point labels its records: listed, each shows the key as the client sent it, its
// route as events name it, and its owner. Sealed with `encryption`, as operators run it.

const ENCRYPTION_KEY = 'Zk3vQ9rT1xLw8pNc2yHs6bJd4mFa7gEu';
const store = new MemoryIdempotencyStore({ sweepIntervalMs: 0 });
const options: IdempotencyModuleOptions = {
  store,
  encryption: { keys: [ENCRYPTION_KEY] },
  abandonedAfter: false,
};
/** Lists the records as an operator's process would: the same store, prefix and keys. */
const records = new IdempotencyRecords(store, resolveModuleOptions(options));

afterAll(() => store.close());

/** The completed record listed with the client's `key`. */
async function listed(key: string) {
  const { items } = await records.list({ state: 'completed', limit: 500 });
  const found = items.filter((item) => item.key === key);
  expect(found).toHaveLength(1);
  return found[0];
}

@Controller()
class PaymentsController {
  @Post('payments')
  @Idempotent({
    scope: (context: ExecutionContext) =>
      context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-tenant'],
  })
  pay() {
    return { paid: true };
  }
}

describe.each(PLATFORMS)('an HTTP route (%s)', (platform) => {
  let app: Awaited<ReturnType<typeof listen>>;
  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot(options)], controllers: [PaymentsController] })
    class AppModule {}
    app = await listen(platform, AppModule);
  });
  afterAll(() => app?.app.close());

  it('labels its record with the key as sent (a quoted header too) and the tenant', async () => {
    const key = `pay-${randomUUID()}`;
    const headers = { 'x-tenant': 'acme', 'Idempotency-Key': `"${key}"` };
    expect((await post(app.url, '/payments', { headers })).status).toBe(201);
    expect(await listed(key)).toMatchObject({
      key,
      route: 'POST /payments',
      tenant: 'acme',
      status: 201,
    });
  });
});

describe.each(GRAPHQL_SERVERS)('a GraphQL mutation (%s)', (server) => {
  it('labels its record with the key and the principal', async () => {
    const api = await startGraphqlApp(server, options);
    try {
      const key = `gql-${randomUUID()}`;
      const mutation = 'mutation ($item: String!) { createOrder(item: $item) { id } }';
      await api.gql(mutation, { key, user: 'ann', variables: { item: 'book' } });
      const [claimed] = api.executions.ofType('claimed');
      expect(await listed(key)).toMatchObject({ key, route: claimed.route, user: { id: 'ann' } });
    } finally {
      await api.close();
    }
  });
});

describe('a gRPC method', () => {
  it('labels its record with the key and the principal', async () => {
    const api = await startGrpcApp(options);
    try {
      const key = `grpc-${randomUUID()}`;
      await api.call('Create', { item: 'book' }, { key, user: 'bob' });
      const [claimed] = api.executions.ofType('claimed');
      expect(await listed(key)).toMatchObject({ key, route: claimed.route, user: { id: 'bob' } });
    } finally {
      await api.close();
    }
  });
});

describe('a message handler (TCP)', () => {
  it('labels its record with the message key', async () => {
    const setup = await transportSetup('tcp');
    const consumer = await startConsumer(setup, options);
    try {
      const key = `msg-${randomUUID()}`;
      await lastValueFrom(
        consumer.client.send(PATTERNS.charge, withKey(setup, { amount: 5 }, key)),
      );
      const [claimed] = consumer.executions.ofType('claimed');
      const item = await listed(key);
      expect(item).toMatchObject({ key, route: claimed.route });
      expect(item.route).toContain(PATTERNS.charge);
    } finally {
      await consumer.close();
    }
  });
});

@Injectable()
class Shipments {
  @IdempotentMethod({ key: (orderId: string) => orderId })
  async ship(orderId: string) {
    return { shipped: orderId };
  }
}

describe('run(), @IdempotentMethod() and the SQS helpers', () => {
  let context: INestApplicationContext;
  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot(options)], providers: [Shipments] })
    class JobsModule {}
    context = await NestFactory.createApplicationContext(JobsModule, { logger: false });
    await context.init();
  });
  afterAll(() => context?.close());

  it('label their records with the key they were given, any text', async () => {
    const service = context.get(IdempotencyService);
    const runKey = `job\n${randomUUID()}\u00e9`;
    await service.run(runKey, () => 1, { scope: 'nightly' });
    expect(await listed(runKey)).toMatchObject({ key: runKey, route: 'run:nightly' });

    const orderId = `order-${randomUUID()}`;
    await context.get(Shipments).ship(orderId);
    expect(await listed(orderId)).toMatchObject({ route: 'run:Shipments.ship' });

    const messageId = randomUUID();
    const handle = idempotentSqsHandler(service, () => undefined, { scope: 'payments' });
    await handle({ MessageId: messageId, Body: '{}' });
    expect(await listed(messageId)).toMatchObject({ key: messageId, route: 'run:payments' });
  });
});
