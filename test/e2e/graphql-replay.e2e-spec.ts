import { GRAPHQL_SERVERS, startGraphqlApp, type GraphqlApp } from '../support/graphql-app';

let seq = 0;
const newKey = () => `gql-${Date.now()}-${++seq}`;

const ORDER = `mutation ($item: String!) {
  createOrder(item: $item) { id item createdAt cents run label }
}`;

describe.each(GRAPHQL_SERVERS)('GraphQL replay on %s', (server) => {
  let api: GraphqlApp;
  beforeAll(async () => {
    api = await startGraphqlApp(server, {});
  });
  afterAll(() => api?.close());

  it('replays the first response byte for byte, scalars and field resolvers included', async () => {
    const key = newKey();
    const first = await api.gql(ORDER, { key, variables: { item: 'book' } });
    const second = await api.gql(ORDER, { key, variables: { item: 'book' } });
    expect(first.body.errors).toBeUndefined();
    expect(first.body.data?.createOrder).toMatchObject({ item: 'book', run: 1 });
    expect(second.text).toBe(first.text);
    expect(api.executions.count('createOrder')).toBe(1);
  });
});
