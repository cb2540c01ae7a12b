import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Args,
  Field,
  GraphQLISODateTime,
  GraphQLModule,
  ID,
  InputType,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import { MercuriusDriver, type MercuriusDriverConfig } from '@nestjs/mercurius';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { GraphQLError, GraphQLScalarType } from 'graphql';
import {
  Idempotent,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  keyFromArgument,
} from '../../lib';
import { Executions } from './test-app';

export type GraphqlServer = 'apollo' | 'mercurius';
/** Apollo on Express, Mercurius on Fastify: the two drivers Nest ships. */
export const GRAPHQL_SERVERS: GraphqlServer[] = ['apollo', 'mercurius'];

/** A strict BigInt scalar: it serialises bigints only, so a replayed string would fail. */
export const BigIntScalar = new GraphQLScalarType({
  name: 'BigInt',
  serialize(value) {
    if (typeof value !== 'bigint') throw new TypeError(`BigInt cannot serialise ${typeof value}`);
    return value.toString();
  },
  parseValue: (value) => BigInt(value as string),
});

/** A business error the `storeErrors` routes store and replay. */
export class OutOfStockError extends GraphQLError {
  constructor(item: string) {
    super(`${item} is out of stock`, { extensions: { code: 'OUT_OF_STOCK', item } });
  }
}

@ObjectType()
export class Order {
  @Field(() => ID)
  id!: string;

  @Field()
  item!: string;

  /** Nest's DateTime scalar serialises Dates only (a string becomes null). */
  @Field(() => GraphQLISODateTime)
  createdAt!: Date;

  @Field(() => BigIntScalar)
  cents!: bigint;

  @Field(() => Int)
  run!: number;

  @Field({ nullable: true })
  owner?: string;
}

@InputType()
export class OrderInput {
  @Field()
  requestId!: string;

  @Field()
  item!: string;
}

let orderSeq = 0;

@Resolver(() => Order)
export class OrdersResolver {
  constructor(private readonly executions: Executions) {}

  private order(name: string, item: string, owner?: string): Order {
    const run = this.executions.hit(name);
    return {
      id: `order-${++orderSeq}`,
      item,
      createdAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, orderSeq)),
      cents: 2n ** 60n + BigInt(orderSeq),
      run,
      owner,
    };
  }

  @Query(() => Int)
  orderCount(): number {
    return this.executions.count('createOrder');
  }

  @Mutation(() => Order, { nullable: true })
  @Idempotent()
  createOrder(@Args('item') item: string): Order {
    return this.order('createOrder', item);
  }

  @Mutation(() => Order, { nullable: true })
  @Idempotent()
  createInvoice(@Args('item') item: string): Order {
    return this.order('createInvoice', item);
  }

  @Mutation(() => Order, { nullable: true })
  @Idempotent({ required: true })
  createRequired(@Args('item') item: string): Order {
    return this.order('createRequired', item);
  }

  @Mutation(() => Order, { nullable: true })
  @Idempotent({ key: keyFromArgument('input.requestId'), required: true })
  createFromInput(@Args('input') input: OrderInput): Order {
    return this.order('createFromInput', input.item);
  }

  /** Held open until the test lets it finish. */
  @Mutation(() => Order, { nullable: true })
  @Idempotent()
  async createSlow(@Args('item') item: string): Promise<Order> {
    await this.executions.hold();
    return this.order('createSlow', item);
  }

  @Mutation(() => Order, { nullable: true })
  @Idempotent({ onConflict: 'wait', waitTimeout: 10_000 })
  async createWaiting(@Args('item') item: string): Promise<Order> {
    await this.executions.hold();
    return this.order('createWaiting', item);
  }

  /** Fails on its first run only, with an error nothing stores: the key must be released. */
  @Mutation(() => Order, { nullable: true })
  @Idempotent()
  createFlaky(@Args('item') item: string): Order {
    if (this.executions.count('createFlaky:failed') === 0) {
      this.executions.hit('createFlaky:failed');
      throw new Error('payment provider timed out');
    }
    return this.order('createFlaky', item);
  }

  @Mutation(() => Order, { nullable: true })
  @Idempotent({ storeErrors: [OutOfStockError] })
  createOutOfStock(@Args('item') item: string): Order {
    this.executions.hit('createOutOfStock');
    throw new OutOfStockError(item);
  }

  /** Records scoped to the caller (`req.user`, or `req.raw.user` on Fastify). */
  @Mutation(() => Order, { nullable: true })
  @Idempotent()
  createOwned(
    @Args('item') item: string,
    @Args('owner', { nullable: true }) owner?: string,
  ): Order {
    return this.order('createOwned', item, owner);
  }

  @ResolveField(() => String)
  label(@Parent() order: Order): string {
    // A field resolver below a replayed field gets what the resolver returned: a Date, a bigint.
    return `${order.item} at ${order.createdAt.getTime()} for ${order.cents * 2n}`;
  }
}

/** `@Idempotent()` on the class: its mutation is idempotent, its query left alone. */
@Resolver()
@Idempotent()
export class IdempotentClassResolver {
  constructor(private readonly executions: Executions) {}

  @Query(() => Int)
  tally(): number {
    return this.executions.hit('tally');
  }

  @Mutation(() => Int)
  bump(): number {
    return this.executions.hit('bump');
  }
}

/** A subscription marked `@Idempotent()`: refused at boot. */
@Resolver()
export class IdempotentSubscriptionResolver {
  @Subscription(() => Int)
  @Idempotent()
  ticks(): AsyncIterator<number> {
    throw new Error('never subscribed');
  }

  @Query(() => Int)
  nothing(): number {
    return 0;
  }
}

/** Schema-first: the same code path, with the schema written by hand. */
export const SCHEMA_FIRST_TYPE_DEFS = /* GraphQL */ `
  type Query {
    ping: String
  }
  type Receipt {
    id: ID!
    run: Int!
    createdAt: String!
  }
  type Mutation {
    issueReceipt(amount: Int!): Receipt
  }
`;

@Resolver('Receipt')
export class ReceiptsResolver {
  constructor(private readonly executions: Executions) {}

  @Query()
  ping(): string {
    return 'pong';
  }

  @Mutation()
  @Idempotent()
  issueReceipt(@Args('amount') amount: number) {
    const run = this.executions.hit('issueReceipt');
    return { id: `receipt-${amount}-${run}`, run, createdAt: new Date().toISOString() };
  }
}

export interface GraphqlApp {
  app: INestApplication;
  url: string;
  executions: Executions;
  /** POSTs one GraphQL operation (real HTTP), with an Idempotency-Key and an `x-user` if given. */
  gql(
    query: string,
    options?: { key?: string; user?: string; variables?: Record<string, unknown> },
  ): Promise<{ status: number; text: string; body: GraphqlBody }>;
  close(): Promise<void>;
}

export interface GraphqlBody {
  data?: Record<string, unknown> | null;
  errors?: { message: string; path?: string[]; extensions?: Record<string, unknown> }[];
}

/**
 * Starts a GraphQL app on a real port: Apollo on Express or Mercurius on Fastify, code-first
 * (`OrdersResolver`) unless `schemaFirst`. A caller's `x-user` header becomes `req.user` (Express)
 * or `req.raw.user` (Fastify), as Passport sets them.
 */
export async function startGraphqlApp(
  server: GraphqlServer,
  options: IdempotencyModuleOptions,
  extra: { schemaFirst?: boolean; resolvers?: (new (...args: never[]) => object)[] } = {},
): Promise<GraphqlApp> {
  const executions = new Executions();
  const schema = extra.schemaFirst
    ? { typeDefs: SCHEMA_FIRST_TYPE_DEFS }
    : { autoSchemaFile: true as const };
  const graphql =
    server === 'apollo'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          ...schema,
          includeStacktraceInErrorResponses: false,
        })
      : GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: MercuriusDriver,
          ...schema,
          // Its query cache is loaded with import(), which Jest's CommonJS runtime cannot run.
          cache: false,
        });
  const resolvers = extra.resolvers ?? (extra.schemaFirst ? [ReceiptsResolver] : [OrdersResolver]);

  @Module({
    imports: [
      graphql,
      IdempotencyModule.forRoot({
        ...options,
        onEvent: (event) => executions.record(event),
      }),
    ],
    providers: [...resolvers, { provide: Executions, useValue: executions }],
  })
  class GraphqlAppModule {}

  let app: INestApplication;
  if (server === 'apollo') {
    app = await NestFactory.create(GraphqlAppModule, { logger: false });
    app.use(
      (
        req: { headers: Record<string, string>; user?: unknown },
        _res: unknown,
        next: () => void,
      ) => {
        if (req.headers['x-user']) req.user = { id: req.headers['x-user'] };
        next();
      },
    );
  } else {
    const fastify = await NestFactory.create<NestFastifyApplication>(
      GraphqlAppModule,
      new FastifyAdapter(),
      { logger: false },
    );
    fastify
      .getHttpAdapter()
      .getInstance()
      .addHook('onRequest', async (request) => {
        const user = request.headers['x-user'];
        if (user) (request.raw as { user?: unknown }).user = { id: user };
      });
    app = fastify;
  }
  await app.listen(0, '127.0.0.1');
  const url = `${await app.getUrl()}/graphql`.replace('[::1]', '127.0.0.1');
  return {
    app,
    url,
    executions,
    async gql(query, { key, user, variables } = {}) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (key !== undefined) headers['idempotency-key'] = key;
      if (user !== undefined) headers['x-user'] = user;
      const response = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ query, variables }),
      });
      const text = await response.text();
      return { status: response.status, text, body: JSON.parse(text) as GraphqlBody };
    },
    close: () => app.close(),
  };
}
