import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Controller, type INestApplication, type INestMicroservice, Module } from '@nestjs/common';
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
import { ClsModule } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import {
  Idempotent,
  type IdempotencyEvent,
  IdempotencyModule,
  IdempotencyRecords,
} from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { findFreePort } from '../support/redis-server';

// Issue 25: `transactional: true` keeps its guarantee on GraphQL (Apollo on Express) and unary gRPC
// as on HTTP: the resolver's/method's row and the record commit in one transaction, and a throw
// after the write rolls both back (the key freed, the retry runs once). PostgreSQL and TypeORM, as
// in transactional.e2e-spec.ts.

const records = uniqueTable('gg_tx_records');
const payments = uniqueTable('gg_tx_payments');
const events: IdempotencyEvent[] = [];
/** Items whose first run already threw: the second run of the failing handlers succeeds. */
const failedOnce = new Set<string>();
let pool: Pool;
let dataSource: DataSource;

/** Inserts a payment row for `item` through the app's transaction; resolves its id. */
async function insert(txHost: TransactionHost, item: string): Promise<number> {
  const sql = `INSERT INTO "${payments}" (key) VALUES ($1) RETURNING id`;
  const [row] = await (txHost.tx as EntityManager).query<{ id: number }[]>(sql, [item]);
  return row.id;
}

@Resolver()
class PaymentsResolver {
  constructor(private readonly txHost: TransactionHost) {}

  @Query(() => Int)
  ping(): number {
    return 0;
  }

  @Mutation(() => Int)
  @Idempotent({ transactional: true })
  pay(@Args('item') item: string): Promise<number> {
    return insert(this.txHost, item);
  }

  @Mutation(() => Int)
  @Idempotent({ transactional: true })
  async payFailingOnce(@Args('item') item: string): Promise<number> {
    const id = await insert(this.txHost, item);
    if (!failedOnce.has(item)) {
      failedOnce.add(item);
      throw new GraphQLError('card declined', { extensions: { code: 'DECLINED' } });
    }
    return id;
  }
}

const PROTO = join(mkdtempSync(join(tmpdir(), 'grpc-tx-')), 'payments.proto');
writeFileSync(
  PROTO,
  `syntax = "proto3";
package payments;
service Payments {
  rpc Pay (PayRequest) returns (Payment);
  rpc PayFailingOnce (PayRequest) returns (Payment);
}
message PayRequest { string item = 1; }
message Payment { int32 id = 1; }
`,
);

@Controller()
class PaymentsGrpcController {
  constructor(private readonly txHost: TransactionHost) {}

  @GrpcMethod('Payments', 'Pay')
  @Idempotent({ transactional: true })
  async pay(request: { item: string }): Promise<{ id: number }> {
    return { id: await insert(this.txHost, request.item) };
  }

  @GrpcMethod('Payments', 'PayFailingOnce')
  @Idempotent({ transactional: true })
  async payFailingOnce(request: { item: string }): Promise<{ id: number }> {
    const id = await insert(this.txHost, request.item);
    if (!failedOnce.has(request.item)) {
      failedOnce.add(request.item);
      throw new RpcException({ code: grpc.status.FAILED_PRECONDITION, message: 'card declined' });
    }
    return { id };
  }
}

/** ClsModule with the TypeORM adapter, and the PostgreSQL store, as an app registers them. */
function appImports() {
  @Module({ providers: [{ provide: DataSource, useValue: dataSource }], exports: [DataSource] })
  class DatabaseModule {}
  return [
    DatabaseModule,
    ClsModule.forRoot({
      // As docs/microservices.md advises (a microservice has no HTTP middleware), and as the
      // ledger consumer fixture does: the interceptor starts the CLS context on either transport.
      interceptor: { mount: true },
      plugins: [
        new ClsPluginTransactional({
          imports: [DatabaseModule],
          adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }),
        }),
      ],
    }),
    IdempotencyModule.forRoot({
      postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
      scope: 'public',
      onEvent: (event) => events.push(event),
    }),
  ];
}

const rows = async (item: string) =>
  Number(
    (await pool.query(`SELECT count(*) FROM "${payments}" WHERE key = $1`, [item])).rows[0].count,
  );

/** The types of the events since `mark` (`events.length` then): the tests run one at a time. */
const typesSince = (mark: number) => events.slice(mark).map((event) => event.type);

/**
 * The PostgreSQL transactions that last wrote the payment of `item` and the record the
 * `completed` event since `mark` names (`xmin`): one and the same when they committed together.
 */
async function writers(item: string, mark: number): Promise<string[]> {
  const completed = events.slice(mark).find((event) => event.type === 'completed')!;
  const xmin = async (table: string, key: string | undefined) =>
    (await pool.query(`SELECT xmin::text AS x FROM "${table}" WHERE key = $1`, [key])).rows[0]?.x;
  return [await xmin(payments, item), await xmin(records, completed.key)];
}

/** The record of `key` as the store has it, on the route the last event named. */
async function recordState(app: { get: INestApplication['get'] }, key: string) {
  const route = events.at(-1)!.route;
  return (await app.get(IdempotencyRecords).inspect({ key, route })).state;
}

beforeAll(async () => {
  pool = await testPool();
  await pool.query(`CREATE TABLE "${payments}" (id serial PRIMARY KEY, key text)`);
  dataSource = await new DataSource({ type: 'postgres', url: testPostgresUrl() }).initialize();
});
afterAll(async () => {
  await dataSource?.destroy();
  await dropTable(pool, payments);
  await dropTable(pool, records);
  await pool.end();
});

describe('transactional completion on a GraphQL mutation (Apollo on Express)', () => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          includeStacktraceInErrorResponses: false,
        }),
        ...appImports(),
      ],
      providers: [PaymentsResolver],
    })
    class GraphqlTransactionalModule {}
    app = await NestFactory.create(GraphqlTransactionalModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = `${await app.getUrl()}/graphql`.replace('[::1]', '127.0.0.1');
  });
  afterAll(() => app?.close());

  const gql = async (field: string, key: string, item: string) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({
        query: `mutation($item: String!) { ${field}(item: $item) }`,
        variables: { item },
      }),
    });
    const text = await response.text();
    return { text, body: JSON.parse(text) as { data?: unknown; errors?: { message: string }[] } };
  };

  it('commits the row and the record together; a retry replays it', async () => {
    const key = randomUUID();
    const mark = events.length;
    const first = await gql('pay', key, key);
    expect(first.body.errors).toBeUndefined();
    const [payment, record] = await writers(key, mark);
    expect(payment).toBeDefined();
    expect(record).toBe(payment);
    const retry = await gql('pay', key, key);
    expect(retry.text).toBe(first.text);
    expect(typesSince(mark)).toEqual(['claimed', 'completed', 'replayed']);
    expect(await rows(key)).toBe(1);
  });

  it('rolls the row back when the resolver throws after writing; the retry runs once', async () => {
    const key = randomUUID();
    const mark = events.length;
    const failed = await gql('payFailingOnce', key, key);
    expect(failed.body.errors?.[0].message).toBe('card declined');
    expect(await rows(key)).toBe(0);
    expect(typesSince(mark)).toEqual(['claimed', 'released']);
    expect(await recordState(app, key)).toBe('absent');
    const retry = await gql('payFailingOnce', key, key);
    expect(retry.body.errors).toBeUndefined();
    expect(await rows(key)).toBe(1);
    expect((await gql('payFailingOnce', key, key)).text).toBe(retry.text);
    expect(await rows(key)).toBe(1);
    expect(typesSince(mark)).toEqual(['claimed', 'released', 'claimed', 'completed', 'replayed']);
  });
});

describe('transactional completion on a unary gRPC method', () => {
  let app: INestMicroservice;
  let client: grpc.Client;

  beforeAll(async () => {
    @Module({ imports: appImports(), controllers: [PaymentsGrpcController] })
    class GrpcTransactionalModule {}
    const address = `127.0.0.1:${await findFreePort()}`;
    app = await NestFactory.createMicroservice<MicroserviceOptions>(GrpcTransactionalModule, {
      transport: Transport.GRPC,
      options: { package: 'payments', protoPath: PROTO, url: address },
      logger: false,
    });
    await app.listen();
    const definition = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO));
    const Payments = (definition.payments as grpc.GrpcObject)
      .Payments as grpc.ServiceClientConstructor;
    client = new Payments(address, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await app?.close();
  });

  const call = (method: string, key: string, item: string) => {
    const metadata = new grpc.Metadata();
    metadata.set('idempotency-key', key);
    return new Promise<{ id: number }>((resolve, reject) => {
      const rpc = (client as unknown as Record<string, (...args: unknown[]) => void>)[method];
      rpc.call(
        client,
        { item },
        metadata,
        (error: grpc.ServiceError | null, reply: { id: number }) =>
          error ? reject(error) : resolve(reply),
      );
    });
  };

  it('commits the row and the record together; a retry replays it', async () => {
    const key = randomUUID();
    const mark = events.length;
    const first = await call('Pay', key, key);
    const [payment, record] = await writers(key, mark);
    expect(payment).toBeDefined();
    expect(record).toBe(payment);
    const retry = await call('Pay', key, key);
    expect(retry).toEqual(first);
    expect(typesSince(mark)).toEqual(['claimed', 'completed', 'replayed']);
    expect(await rows(key)).toBe(1);
  });

  it('rolls the row back when the method throws after writing; the retry runs once', async () => {
    const key = randomUUID();
    const mark = events.length;
    await expect(call('PayFailingOnce', key, key)).rejects.toMatchObject({
      code: grpc.status.FAILED_PRECONDITION,
      details: 'card declined',
    });
    expect(await rows(key)).toBe(0);
    expect(typesSince(mark)).toEqual(['claimed', 'released']);
    expect(await recordState(app, key)).toBe('absent');
    const retry = await call('PayFailingOnce', key, key);
    expect(await rows(key)).toBe(1);
    expect(await call('PayFailingOnce', key, key)).toEqual(retry);
    expect(await rows(key)).toBe(1);
    expect(typesSince(mark)).toEqual(['claimed', 'released', 'claimed', 'completed', 'replayed']);
  });
});
