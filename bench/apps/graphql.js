// The GraphQL app under test: a schema-first mutation on Apollo (Express) or Mercurius
// (Fastify), DRIVER=apollo|mercurius. Env: see apps/common.js. Prints `READY <port> <control>`.
// Mutations: pay(amount) with @Idempotent() and payPlain(amount) without (the plain lane), both
// answering the ~200 B payment of bench/payload.js as a Payment object; hold(key) runs until the
// control server releases its key (409 for a duplicate). The key travels in the Idempotency-Key
// header of the POST /graphql request.
const { load, LIBRARY, executed, moduleOptions, ready, decorate } = require('./common');
load('reflect-metadata');
const { Module } = load('@nestjs/common');
const { NestFactory } = load('@nestjs/core');
const { Args, GraphQLModule, Mutation, Query, Resolver } = load('@nestjs/graphql');
const { Idempotent, IdempotencyModule } = load(LIBRARY);
const { payment } = require('../payload');
const holds = require('../holds');

const typeDefs = /* GraphQL */ `
  type Query {
    ping: String
  }
  type Payment {
    id: String!
    object: String!
    status: String!
    amount: Int!
    currency: String!
    created: Int!
    customer: String!
    description: String!
  }
  type Held {
    held: String!
    completedAt: Float!
  }
  type Mutation {
    pay(amount: Int!): Payment
    payPlain(amount: Int!): Payment
    hold(key: String!): Held
  }
`;

class BenchResolver {
  ping() {
    return 'pong';
  }
  pay(amount) {
    executed();
    return payment(amount);
  }
  payPlain(amount) {
    executed();
    return payment(amount);
  }
  hold(key) {
    return holds.hold(key);
  }
}
decorate(BenchResolver, 'ping', [Query('ping')]);
decorate(BenchResolver, 'pay', [Mutation('pay'), Idempotent()], [Args('amount')]);
decorate(BenchResolver, 'payPlain', [Mutation('payPlain')], [Args('amount')]);
decorate(BenchResolver, 'hold', [Mutation('hold'), Idempotent()], [Args('key')]);
Resolver()(BenchResolver);

const apollo = process.env.DRIVER !== 'mercurius';
function graphqlModule() {
  if (apollo) {
    const { ApolloDriver } = load('@nestjs/apollo');
    return GraphQLModule.forRoot({
      driver: ApolloDriver,
      typeDefs,
      includeStacktraceInErrorResponses: false,
    });
  }
  const { MercuriusDriver } = load('@nestjs/mercurius');
  return GraphQLModule.forRoot({ driver: MercuriusDriver, typeDefs });
}

class AppModule {}
Module({
  imports: [graphqlModule(), IdempotencyModule.forRoot(moduleOptions())],
  providers: [BenchResolver],
})(AppModule);

async function main() {
  let app;
  if (apollo) {
    app = await NestFactory.create(AppModule, { logger: ['error'] });
  } else {
    const { FastifyAdapter } = load('@nestjs/platform-fastify');
    app = await NestFactory.create(AppModule, new FastifyAdapter(), { logger: ['error'] });
  }
  await app.listen(0, '127.0.0.1');
  await ready(app.getHttpServer().address().port);
}
main();
