import Redis, { Cluster } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/redis';
import {
  RedisClusterProcesses,
  RedisProcess,
  startRedisCluster,
  startRedisServer,
} from '../support/redis-server';
import { SentinelProcess, startSentinel } from '../support/redis-sentinel';
import { runStepCases, step } from '../support/step-cases';

/**
 * Steps on Redis: a hash `<record key>:steps` in the record's slot, read and written by the
 * scripts of resumable runs. The same cases on a single node, through a client with its own
 * keyPrefix and auto-pipelining, on a 3-master Cluster and through Sentinel.
 */
runStepCases({
  name: 'Redis, single node',
  createStore: async () =>
    new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true }),
  closeStore: (store) => store.close(),
  keyPrefix: uniquePrefix('steps-single'),
});

runStepCases({
  name: 'Redis, through a client with keyPrefix and auto-pipelining',
  createStore: async () =>
    new RedisIdempotencyStore(
      new Redis(testRedisUrl(), {
        keyPrefix: uniquePrefix('steps-client-prefix'),
        enableAutoPipelining: true,
      }),
      { ownsClient: true },
    ),
  closeStore: (store) => store.close(),
});

let cluster: RedisClusterProcesses;

runStepCases({
  name: 'Redis Cluster, 3 masters',
  createStore: async () => {
    cluster = await startRedisCluster({ masters: 3 });
    return new RedisIdempotencyStore(new Cluster(cluster.nodes), { ownsClient: true });
  },
  closeStore: async (store) => {
    await store.close();
    await cluster.stop();
  },
});

let master: RedisProcess;
let sentinel: SentinelProcess;

runStepCases({
  name: 'Redis through Sentinel',
  createStore: async () => {
    master = await startRedisServer();
    sentinel = await startSentinel(master.port);
    const client = new Redis({
      sentinels: [{ host: '127.0.0.1', port: sentinel.port }],
      name: 'mymaster',
    });
    return new RedisIdempotencyStore(client, { ownsClient: true });
  },
  closeStore: async (store) => {
    await store.close();
    await sentinel.stop();
    await master.stop();
  },
});

describe('steps on a Redis Cluster', () => {
  let nodes: RedisClusterProcesses;
  let store: RedisIdempotencyStore;

  beforeAll(async () => {
    nodes = await startRedisCluster({ masters: 3 });
    store = new RedisIdempotencyStore(new Cluster(nodes.nodes), { ownsClient: true });
  }, 60_000);
  afterAll(async () => {
    await store.close();
    await nodes.stop();
  });

  it('keeps a record and its steps on one slot, whichever slot the key has', async () => {
    // Keys on many slots, so all three masters hold some (a script refused for CROSSSLOT fails).
    for (let i = 0; i < 30; i++) {
      const key = `order:{${i}}`;
      await store.claim(key, { token: 't', fingerprint: 'f', leaseMs: 60_000, resumable: true });
      expect(await store.recordStep(key, 't', step(0, 'order'), 60_000)).toBe(true);
      const slot = await store.client.cluster('KEYSLOT', key);
      expect(await store.client.cluster('KEYSLOT', `${key}:steps`)).toBe(slot);
    }
  });

  it('refuses resumable calls on a key without a hash tag, naming the reason', async () => {
    const claim = { token: 't', fingerprint: 'f', leaseMs: 60_000, resumable: true };
    await expect(store.claim('plain-key', claim)).rejects.toThrow(/\{hash tag\}.*plain-key/);
    await expect(store.recordStep('plain-key', 't', step(0, 'a'), 1_000)).rejects.toThrow(
      /hash tag/,
    );
    // Everything else about such a key works as before: it cannot have steps.
    const plain = { token: 't', fingerprint: 'f', leaseMs: 60_000 };
    expect(await store.claim('plain-key', plain)).toEqual({ status: 'claimed' });
    expect(await store.inspect('plain-key')).toMatchObject({ state: 'pending' });
    expect(await store.delete('plain-key')).toBe(true);
  });
});
