import { threeStores } from '../support/stores';
import { GRAPHQL_SERVERS, startGraphqlApp, type GraphqlApp } from '../support/graphql-app';

// What depends on the store: replay, a concurrent duplicate, wait mode; on each store, on
// Apollo (Express) and Mercurius (Fastify). The rest: graphql-mutations.e2e-spec.ts.

let seq = 0;
const newKey = () => `gql-${Date.now()}-${++seq}`;

const fields = 'id item createdAt cents run label';
const mutation = (name: string) =>
  `mutation ($item: String!) { ${name}(item: $item) { ${fields} } }`;

const { stores: STORES, cleanUp } = threeStores('graphql');

afterAll(cleanUp);

describe.each(STORES)('GraphQL mutations on the $name store', (store) => {
  describe.each(GRAPHQL_SERVERS)('%s', (server) => {
    let api: GraphqlApp;
    beforeAll(async () => {
      api = await startGraphqlApp(server, store.options());
    });
    afterAll(() => api?.close());

    it('replays the first response byte for byte: DateTime, BigInt, field resolvers', async () => {
      const key = newKey();
      const first = await api.gql(mutation('createOrder'), { key, variables: { item: 'book' } });
      const second = await api.gql(mutation('createOrder'), { key, variables: { item: 'book' } });
      expect(first.body.errors).toBeUndefined();
      const order = first.body.data?.createOrder as Record<string, unknown>;
      // The scalars serialised a Date and a bigint, the field resolver computed with them.
      expect(order.createdAt).toMatch(/^2026-01-02T03:04:05\.\d{3}Z$/);
      expect(order.cents).toMatch(/^11529215046068469\d\d$/);
      expect(order.label).toBe(
        `book at ${Date.parse(order.createdAt as string)} for ${BigInt(order.cents as string) * 2n}`,
      );
      expect(second.status).toBe(first.status);
      expect(second.text).toBe(first.text);
      expect(api.executions.count('createOrder')).toBe(1);
    });

    it('answers a concurrent duplicate IDEMPOTENCY_IN_PROGRESS with retryAfter', async () => {
      const key = newKey();
      const first = api.gql(mutation('createSlow'), { key, variables: { item: 'pen' } });
      const release = await api.executions.nextStarted();
      const duplicate = await api.gql(mutation('createSlow'), { key, variables: { item: 'pen' } });
      release();
      expect(duplicate.body.data).toEqual({ createSlow: null });
      expect(duplicate.body.errors).toEqual([
        expect.objectContaining({
          path: ['createSlow'],
          extensions: expect.objectContaining({
            code: 'IDEMPOTENCY_IN_PROGRESS',
            retryAfter: expect.any(Number),
          }),
        }),
      ]);
      expect((duplicate.body.errors?.[0].extensions?.retryAfter as number) >= 1).toBe(true);
      expect((await first).body.data?.createSlow).toMatchObject({ item: 'pen', run: 1 });
      expect(api.executions.count('createSlow')).toBe(1);
    });

    it("waits for the first run under onConflict: 'wait' and gets its response", async () => {
      const key = newKey();
      const first = api.gql(mutation('createWaiting'), { key, variables: { item: 'ink' } });
      const release = await api.executions.nextStarted();
      const waiting = api.executions.waitFor('waiting');
      const second = api.gql(mutation('createWaiting'), { key, variables: { item: 'ink' } });
      await waiting;
      release();
      const [a, b] = await Promise.all([first, second]);
      expect(a.body.errors).toBeUndefined();
      expect(b.text).toBe(a.text);
      expect(api.executions.count('createWaiting')).toBe(1);
    });
  });
});
