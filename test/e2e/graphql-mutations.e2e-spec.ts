import { findFreePort } from '../support/redis-server';
import {
  GRAPHQL_SERVERS,
  IdempotentClassResolver,
  IdempotentSubscriptionResolver,
  startGraphqlApp,
  type GraphqlApp,
} from '../support/graphql-app';

// Every behaviour of @Idempotent() on a mutation, on Apollo (Express) and Mercurius (Fastify),
// on the memory store; what depends on the store runs on each in graphql-replay.e2e-spec.ts.

let seq = 0;
const newKey = () => `gql-m-${Date.now()}-${++seq}`;

const fields = 'id item createdAt cents run label';
const mutation = (name: string, args = '$item: String!', call = 'item: $item') =>
  `mutation (${args}) { ${name}(${call}) { ${fields} } }`;

/** The `extensions.code` of each error of a response, by field. */
const codes = (body: { errors?: { path?: string[]; extensions?: Record<string, unknown> }[] }) =>
  Object.fromEntries((body.errors ?? []).map((e) => [e.path?.join('.'), e.extensions?.code]));

describe.each(GRAPHQL_SERVERS)('GraphQL mutations on %s', (server) => {
  let api: GraphqlApp;
  beforeAll(async () => {
    api = await startGraphqlApp(server, {});
  });
  afterAll(() => api?.close());

  it('runs two idempotent mutations of one document once each, and replays both', async () => {
    const key = newKey();
    const document = `mutation {
      createOrder(item: "desk") { ${fields} }
      createInvoice(item: "desk") { ${fields} }
    }`;
    const first = await api.gql(document, { key });
    const retry = await api.gql(document, { key });
    expect(first.body.errors).toBeUndefined();
    expect(first.body.data?.createOrder).toMatchObject({ item: 'desk', run: expect.any(Number) });
    expect(first.body.data?.createInvoice).toMatchObject({ item: 'desk', run: 1 });
    expect(retry.text).toBe(first.text);
    expect(api.executions.count('createInvoice')).toBe(1);
  });

  it('refuses a key reused with other arguments, leaving the other fields alone', async () => {
    const key = newKey();
    await api.gql(mutation('createOrder'), { key, variables: { item: 'lamp' } });
    const runs = api.executions.count('createOrder');
    const reused = await api.gql(
      `mutation { createOrder(item: "chair") { id } createInvoice(item: "chair") { item run } }`,
      { key },
    );
    expect(codes(reused.body)).toEqual({ createOrder: 'IDEMPOTENCY_KEY_REUSED' });
    expect(reused.body.data).toEqual({
      createOrder: null,
      createInvoice: { item: 'chair', run: expect.any(Number) },
    });
    expect(api.executions.count('createOrder')).toBe(runs);
  });

  it('refuses a missing key (required) and an invalid one, running nothing', async () => {
    const missing = await api.gql(mutation('createRequired'), { variables: { item: 'x' } });
    const invalid = await api.gql(mutation('createRequired'), {
      key: 'k'.repeat(300),
      variables: { item: 'x' },
    });
    expect(codes(missing.body)).toEqual({ createRequired: 'IDEMPOTENCY_KEY_MISSING' });
    expect(codes(invalid.body)).toEqual({ createRequired: 'IDEMPOTENCY_KEY_INVALID' });
    expect(api.executions.count('createRequired')).toBe(0);
  });

  it('takes the key from an argument (keyFromArgument)', async () => {
    const requestId = newKey();
    const document = mutation('createFromInput', '$input: OrderInput!', 'input: $input');
    const variables = { input: { requestId, item: 'mug' } };
    const first = await api.gql(document, { variables });
    const second = await api.gql(document, { variables });
    expect(first.body.errors).toBeUndefined();
    expect(second.text).toBe(first.text);
    expect(api.executions.count('createFromInput')).toBe(1);
  });

  it('releases the key when the resolver fails, so a retry runs it', async () => {
    const key = newKey();
    const failed = await api.gql(mutation('createFlaky'), { key, variables: { item: 'cup' } });
    expect(failed.body.errors?.[0].message).toBe('payment provider timed out');
    const retried = await api.gql(mutation('createFlaky'), { key, variables: { item: 'cup' } });
    expect(retried.body.errors).toBeUndefined();
    expect(retried.body.data?.createFlaky).toMatchObject({ item: 'cup', run: 1 });
  });

  it('replays an error that storeErrors matches as the same GraphQL error', async () => {
    const key = newKey();
    const first = await api.gql(mutation('createOutOfStock'), { key, variables: { item: 'tea' } });
    const replay = await api.gql(mutation('createOutOfStock'), { key, variables: { item: 'tea' } });
    expect(first.body.errors).toEqual([
      expect.objectContaining({
        message: 'tea is out of stock',
        extensions: expect.objectContaining({ code: 'OUT_OF_STOCK', item: 'tea' }),
      }),
    ]);
    expect(replay.text).toBe(first.text);
    expect(api.executions.count('createOutOfStock')).toBe(1);
  });

  it('scopes records to the principal (req.user; req.raw.user on Fastify)', async () => {
    const key = newKey();
    const document = mutation('createOwned');
    const alice = await api.gql(document, { key, user: 'alice', variables: { item: 'pen' } });
    const bob = await api.gql(document, { key, user: 'bob', variables: { item: 'pen' } });
    const aliceAgain = await api.gql(document, { key, user: 'alice', variables: { item: 'pen' } });
    expect(bob.body.data?.createOwned).not.toEqual(alice.body.data?.createOwned);
    expect(aliceAgain.text).toBe(alice.text);
    expect(api.executions.count('createOwned')).toBe(2);
  });

  it('leaves queries alone', async () => {
    const key = newKey();
    const before = await api.gql('{ orderCount }', { key });
    await api.gql(mutation('createOrder'), { key, variables: { item: 'q' } });
    const after = await api.gql('{ orderCount }', { key });
    expect(after.body.data?.orderCount).toBe((before.body.data?.orderCount as number) + 1);
  });
});

describe.each(GRAPHQL_SERVERS)('schema-first GraphQL on %s', (server) => {
  it('replays a schema-first mutation', async () => {
    const api = await startGraphqlApp(server, {}, { schemaFirst: true });
    try {
      const key = newKey();
      const document = 'mutation { issueReceipt(amount: 5) { id run createdAt } }';
      const first = await api.gql(document, { key });
      const second = await api.gql(document, { key });
      expect(first.body.data?.issueReceipt).toMatchObject({ id: 'receipt-5-1', run: 1 });
      expect(second.text).toBe(first.text);
      expect(api.executions.count('issueReceipt')).toBe(1);
    } finally {
      await api.close();
    }
  });
});

describe.each(GRAPHQL_SERVERS)('@Idempotent() on a resolver class on %s', (server) => {
  it('makes its mutations idempotent and leaves its queries alone', async () => {
    const api = await startGraphqlApp(server, {}, { resolvers: [IdempotentClassResolver] });
    try {
      const key = newKey();
      const bumps = [await api.gql('mutation { bump }', { key })];
      bumps.push(await api.gql('mutation { bump }', { key }));
      const tallies = [await api.gql('{ tally }', { key }), await api.gql('{ tally }', { key })];
      expect(bumps.map((r) => r.body.data?.bump)).toEqual([1, 1]);
      expect(tallies.map((r) => r.body.data?.tally)).toEqual([1, 2]);
      expect(tallies.every((r) => r.body.errors === undefined)).toBe(true);
    } finally {
      await api.close();
    }
  });
});

describe.each(GRAPHQL_SERVERS)('GraphQL store outage on %s', (server) => {
  it('answers IDEMPOTENCY_STORE_UNAVAILABLE with retryAfter and runs nothing', async () => {
    const deadPort = await findFreePort();
    const api = await startGraphqlApp(server, {
      redis: `redis://127.0.0.1:${deadPort}`,
      storeTimeout: 300,
    });
    try {
      const down = await api.gql(mutation('createOrder'), {
        key: newKey(),
        variables: { item: 'x' },
      });
      expect(down.body.errors).toEqual([
        expect.objectContaining({
          path: ['createOrder'],
          extensions: expect.objectContaining({
            code: 'IDEMPOTENCY_STORE_UNAVAILABLE',
            retryAfter: 1,
          }),
        }),
      ]);
      expect(api.executions.count('createOrder')).toBe(0);
    } finally {
      await api.close();
    }
  });
});

describe('GraphQL boot checks', () => {
  it('refuses @Idempotent() on a subscription at boot', async () => {
    await expect(
      startGraphqlApp('apollo', {}, { resolvers: [IdempotentSubscriptionResolver] }),
    ).rejects.toThrow(
      'IdempotencyModule: IdempotentSubscriptionResolver.ticks is a GraphQL subscription',
    );
  });
});
