import { describeStore, readConfig, redisOption } from '../src/config';

describe('the sample configuration from the environment', () => {
  it('defaults to ports 3000/3001 and the in-memory store', () => {
    const config = readConfig({});
    expect(config).toMatchObject({ port: 3000, tcpPort: 3001, store: { kind: 'memory' } });
    expect(config.keyPrefix).toBeUndefined();
    expect(redisOption(config.store)).toBeUndefined();
  });

  it('switches to Redis with REDIS_URL, masking its password in the startup line', () => {
    const config = readConfig({ REDIS_URL: 'redis://app:s3cret@10.0.0.5:6379/2' });
    expect(redisOption(config.store)).toBe('redis://app:s3cret@10.0.0.5:6379/2');
    expect(describeStore(config.store)).toBe('Redis at redis://app:***@10.0.0.5:6379/2');
  });

  it('switches to a Cluster with REDIS_CLUSTER_NODES, which wins over REDIS_URL', () => {
    const config = readConfig({
      REDIS_URL: 'redis://127.0.0.1:6379',
      REDIS_CLUSTER_NODES: 'redis-1:7000, redis-2:7001',
    });
    expect(redisOption(config.store)).toEqual({
      clusterNodes: [
        { host: 'redis-1', port: 7000 },
        { host: 'redis-2', port: 7001 },
      ],
    });
    expect(describeStore(config.store)).toBe('Redis Cluster at redis-1:7000, redis-2:7001');
  });

  it('reads ports, key prefix and simulated latencies', () => {
    const config = readConfig({
      PORT: '8080',
      TCP_PORT: '0',
      IDEMPOTENCY_KEY_PREFIX: 'shop:',
      PAYMENT_DELAY_MS: '0',
      REPORT_DELAY_MS: '10',
    });
    expect(config).toMatchObject({
      port: 8080,
      tcpPort: 0,
      keyPrefix: 'shop:',
      paymentDelayMs: 0,
      reportDelayMs: 10,
    });
  });

  it('fails at startup on malformed values, naming the variable', () => {
    expect(() => readConfig({ PORT: 'http' })).toThrow('PORT must be a whole number');
    expect(() => readConfig({ REDIS_CLUSTER_NODES: 'redis-1' })).toThrow('REDIS_CLUSTER_NODES');
  });
});
