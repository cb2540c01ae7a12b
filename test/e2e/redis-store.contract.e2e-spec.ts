import Redis, { Cluster } from 'ioredis';
import { RedisIdempotencyStore } from '../../lib';
import { runIdempotencyStoreContract } from '../../lib/testing';
import { testRedisUrl, uniquePrefix } from '../support/redis';
import { RedisClusterProcesses, startRedisCluster } from '../support/redis-server';

const realTime = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

runIdempotencyStoreContract({
  name: 'RedisIdempotencyStore on a single redis-server',
  createStore: () => new RedisIdempotencyStore(new Redis(testRedisUrl()), { ownsClient: true }),
  advanceTime: realTime,
  keyPrefix: uniquePrefix('contract-single'),
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
  keyPrefix: uniquePrefix('contract-cluster'),
});
