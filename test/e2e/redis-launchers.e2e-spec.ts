import { existsSync } from 'node:fs';
import Redis, { Cluster } from 'ioredis';
import {
  RedisClusterProcesses,
  RedisProcess,
  startRedisCluster,
  startRedisServer,
} from '../support/redis-server';

/**
 * Self-check for the launchers every Redis-backed suite depends on: if these fail, the store and
 * cluster suites would fail for reasons that have nothing to do with the library.
 */
describe('test Redis launchers', () => {
  let server: RedisProcess | undefined;
  let cluster: RedisClusterProcesses | undefined;

  afterAll(async () => {
    // stop() is idempotent, so this is a safety net for a test that failed before its own stop().
    await Promise.allSettled([server?.stop(), cluster?.stop()]);
  });

  it('starts a throwaway redis-server on a free port and stops it by PID', async () => {
    server = await startRedisServer();
    expect(server.host).toBe('127.0.0.1');
    expect(server.port).not.toBe(6379);
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);

    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    try {
      await expect(client.ping()).resolves.toBe('PONG');
    } finally {
      client.disconnect();
    }

    const { pid, dir } = server;
    expect(() => process.kill(pid, 0)).not.toThrow();
    await server.stop();
    // Signal 0 only checks existence: ESRCH means the process is gone (and was reaped).
    expect(() => process.kill(pid, 0)).toThrow();
    expect(existsSync(dir)).toBe(false);
  }, 30_000);

  it('forms a 3-master cluster whose slots are all covered', async () => {
    cluster = await startRedisCluster();
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.processes).toHaveLength(3);

    const client = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
    try {
      const keys = Array.from({ length: 20 }, (_, i) => `launcher-check:${i}`);
      for (const key of keys) await client.set(key, `value-of-${key}`);
      for (const key of keys) await expect(client.get(key)).resolves.toBe(`value-of-${key}`);

      // The keys must really be spread: distinct slots, owned by more than one master.
      const slots = await Promise.all(keys.map((key) => client.cluster('KEYSLOT', key)));
      expect(new Set(slots).size).toBeGreaterThan(10);
      const sizes = await Promise.all(client.nodes('master').map((node) => node.dbsize()));
      expect(sizes.filter((size) => size > 0).length).toBeGreaterThan(1);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(keys.length);

      const info = await client.cluster('INFO');
      expect(info).toMatch(/^cluster_state:ok\r?$/m);
      expect(info).toMatch(/^cluster_slots_assigned:16384\r?$/m);
    } finally {
      client.disconnect();
    }

    const pids = cluster.processes.map((p) => p.pid);
    await cluster.stop();
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 30_000);
});
