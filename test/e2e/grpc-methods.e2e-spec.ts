import { type ServiceError, status } from '@grpc/grpc-js';
import { startGrpcApp, StreamingController, type GrpcApp } from '../support/grpc-app';
import { threeStores } from '../support/stores';
import { findFreePort } from '../support/redis-server';

// @Idempotent() on unary @GrpcMethod() handlers: a real Nest gRPC server, a @grpc/grpc-js client.
// What depends on the store (replay, a concurrent duplicate, wait mode) runs on each store; the
// rest on memory.

let seq = 0;
const newKey = () => `grpc-${Date.now()}-${++seq}`;

/** The gRPC error a call failed with. */
async function failure(call: Promise<unknown>): Promise<ServiceError> {
  try {
    await call;
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error('the call succeeded');
}

const { stores: STORES, cleanUp } = threeStores('grpc');

afterAll(cleanUp);

describe.each(STORES)('gRPC methods on the $name store', (store) => {
  let api: GrpcApp;
  beforeAll(async () => {
    api = await startGrpcApp(store.options());
  });
  afterAll(() => api?.close());

  it('replays the first response, a bytes field included', async () => {
    const key = newKey();
    const first = await api.call('Create', { item: 'book' }, { key });
    const second = await api.call('Create', { item: 'book' }, { key });
    expect(first).toMatchObject({ item: 'book', run: expect.any(Number) });
    expect(Buffer.isBuffer(first.receipt) && first.receipt.length).toBe(3);
    expect(second).toEqual(first);
    expect(api.executions.count('Create')).toBe(first.run);
  });

  it('answers a concurrent duplicate ABORTED with a retry delay', async () => {
    const key = newKey();
    const first = api.call('CreateSlow', { item: 'pen' }, { key });
    const release = await api.executions.nextStarted();
    const duplicate = await failure(api.call('CreateSlow', { item: 'pen' }, { key }));
    release();
    expect(duplicate.code).toBe(status.ABORTED);
    expect(duplicate.details).toMatch(/^IDEMPOTENCY_IN_PROGRESS: .* Retry after \d+ ms\.$/);
    expect(Number(duplicate.metadata.get('retry-after-ms')[0])).toBeGreaterThanOrEqual(1000);
    expect(await first).toMatchObject({ item: 'pen', run: 1 });
    expect(api.executions.count('CreateSlow')).toBe(1);
  });

  it("waits for the first run under onConflict: 'wait'", async () => {
    const key = newKey();
    const first = api.call('CreateWaiting', { item: 'ink' }, { key });
    const release = await api.executions.nextStarted();
    const waiting = api.executions.waitFor('waiting');
    const second = api.call('CreateWaiting', { item: 'ink' }, { key });
    await waiting;
    release();
    expect(await second).toEqual(await first);
    expect(api.executions.count('CreateWaiting')).toBe(1);
  });
});

describe('gRPC methods: refusals, errors, scope (memory store)', () => {
  let api: GrpcApp;
  beforeAll(async () => {
    api = await startGrpcApp({});
  });
  afterAll(() => api?.close());

  it('refuses a key reused with another message FAILED_PRECONDITION', async () => {
    const key = newKey();
    await api.call('Create', { item: 'lamp' }, { key });
    const runs = api.executions.count('Create');
    const reused = await failure(api.call('Create', { item: 'chair' }, { key }));
    expect(reused.code).toBe(status.FAILED_PRECONDITION);
    expect(reused.details).toMatch(/^IDEMPOTENCY_KEY_REUSED: /);
    expect(api.executions.count('Create')).toBe(runs);
  });

  it('refuses a missing key (required) and one too long INVALID_ARGUMENT', async () => {
    const missing = await failure(api.call('CreateRequired', { item: 'x' }));
    const long = await failure(api.call('CreateRequired', { item: 'x' }, { key: 'k'.repeat(300) }));
    expect([missing.code, long.code]).toEqual([status.INVALID_ARGUMENT, status.INVALID_ARGUMENT]);
    expect(missing.details).toMatch(/^IDEMPOTENCY_KEY_MISSING: /);
    expect(long.details).toMatch(/^IDEMPOTENCY_KEY_INVALID: /);
    expect(api.executions.count('CreateRequired')).toBe(0);
  });

  it('takes the key from the request message (keyFromArgument)', async () => {
    const request = { item: 'mug', request_id: newKey() };
    const first = await api.call('CreateFromMessage', request);
    const second = await api.call('CreateFromMessage', request);
    expect(second).toEqual(first);
    expect(api.executions.count('CreateFromMessage')).toBe(1);
  });

  it('releases the key when the method fails, so a retry runs it', async () => {
    const key = newKey();
    const failed = await failure(api.call('CreateFlaky', { item: 'cup' }, { key }));
    expect(failed.code).toBe(status.INTERNAL);
    const retried = await api.call('CreateFlaky', { item: 'cup' }, { key });
    expect(retried).toMatchObject({ item: 'cup', run: 1 });
  });

  it('replays an RpcException that storeErrors matches with its status code', async () => {
    const key = newKey();
    const first = await failure(api.call('CreateOutOfStock', { item: 'tea' }, { key }));
    const replay = await failure(api.call('CreateOutOfStock', { item: 'tea' }, { key }));
    expect(first.code).toBe(status.NOT_FOUND);
    expect([replay.code, replay.details]).toEqual([first.code, first.details]);
    expect(api.executions.count('CreateOutOfStock')).toBe(1);
  });

  it('scopes records to the principal a guard put on the call', async () => {
    const key = newKey();
    const alice = await api.call('Create', { item: 'pen' }, { key, user: 'alice' });
    const bob = await api.call('Create', { item: 'pen' }, { key, user: 'bob' });
    const aliceAgain = await api.call('Create', { item: 'pen' }, { key, user: 'alice' });
    expect(alice.owner).toBe('alice');
    expect(bob.owner).toBe('bob');
    expect(aliceAgain).toEqual(alice);
  });
});

describe('gRPC store outage', () => {
  it('answers UNAVAILABLE and runs nothing', async () => {
    const deadPort = await findFreePort();
    const api = await startGrpcApp({ redis: `redis://127.0.0.1:${deadPort}`, storeTimeout: 300 });
    try {
      const down = await failure(api.call('Create', { item: 'x' }, { key: newKey() }));
      expect(down.code).toBe(status.UNAVAILABLE);
      expect(down.details).toMatch(/^IDEMPOTENCY_STORE_UNAVAILABLE: /);
      expect(api.executions.count('Create')).toBe(0);
    } finally {
      await api.close();
    }
  });
});

describe('gRPC boot checks', () => {
  it('refuses @Idempotent() on a streaming method at boot', async () => {
    await expect(startGrpcApp({}, [StreamingController])).rejects.toThrow(
      'IdempotencyModule: StreamingController serves the streaming gRPC method Orders/Watch',
    );
  });
});
