import Redis, { Cluster } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { runIdempotencyStoreContract } from '../../lib/testing';
import { testRedisUrl, uniquePrefix } from '../support/redis';
import { RedisClusterProcesses, startRedisCluster } from '../support/redis-server';

const realTime = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
// Leases and ttls on a real clock: long enough that a busy CI machine (the NestJS 12 lane's two
// workers on two cores) does not outlive one between two calls of a test.
const leaseMs = 800;

runIdempotencyStoreContract({
  name: 'RedisIdempotencyStore on a single redis-server',
  createStore: () => new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true }),
  advanceTime: realTime,
  leaseMs,
  keyPrefix: uniquePrefix('contract-single'),
});

// ioredis's own key prefix and auto-pipelining: the store sends its scripts itself on one node,
// so the prefix must reach the keys, and the channels it watches, all the same.
runIdempotencyStoreContract({
  name: 'RedisIdempotencyStore through a client with keyPrefix and auto-pipelining',
  createStore: () =>
    new RedisIdempotencyStore(
      new Redis(testRedisUrl(), {
        keyPrefix: uniquePrefix('contract-client-prefix'),
        enableAutoPipelining: true,
      }),
      { ownsClient: true },
    ),
  advanceTime: realTime,
  leaseMs,
});

let cluster: RedisClusterProcesses;

runIdempotencyStoreContract({
  name: 'RedisIdempotencyStore on a 3-master Redis Cluster',
  createStore: async () => {
    cluster = await startRedisCluster({ masters: 3 });
    return new RedisIdempotencyStore(new Cluster(cluster.nodes), { ownsClient: true });
  },
  closeStore: async (store) => {
    await store.close();
    await cluster.stop();
  },
  advanceTime: realTime,
  leaseMs,
  keyPrefix: uniquePrefix('contract-cluster'),
});
