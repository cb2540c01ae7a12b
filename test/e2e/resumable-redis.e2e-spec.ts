import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import {
  IdempotencyEvent,
  IdempotencyModule,
  type IdempotencyModuleOptions,
  IdempotencyService,
  IdempotencyStore,
  RedisIdempotencyStore,
} from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/redis';
import { RedisClusterProcesses, startRedisCluster } from '../support/redis-server';

/**
 * `resumable` runs on the Redis store the module builds, on a single node and on a Cluster: the
 * steps a failed run recorded come back to its retry, which runs only the steps after them; the
 * completion deletes them; an operator sees them meanwhile.
 */
let cluster: RedisClusterProcesses | undefined;

const topologies: { name: string; redis: () => Promise<IdempotencyModuleOptions['redis']> }[] = [
  { name: 'a single node', redis: async () => testRedisUrl() },
  {
    name: 'a 3-master Cluster',
    redis: async () => {
      cluster = await startRedisCluster({ masters: 3 });
      return { clusterNodes: cluster.nodes };
    },
  },
];

afterAll(async () => {
  await cluster?.stop();
});

describe.each(topologies)('resumable run() on Redis, $name', (topology) => {
  const events: IdempotencyEvent[] = [];
  let app: INestApplicationContext;
  let service: IdempotencyService;
  let store: IdempotencyStore;

  beforeAll(async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          redis: await topology.redis(),
          keyPrefix: uniquePrefix('resumable'),
          onEvent: (event) => events.push(event),
        }),
      ],
    })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    await app.init();
    service = app.get(IdempotencyService);
    store = app.get(IdempotencyStore);
  }, 60_000);
  afterAll(() => app?.close());

  it('resumes a failed run after its recorded steps, and clears them with the completion', async () => {
    const key = randomUUID();
    const ran: string[] = [];
    let fail = true;
    const fn = async () => {
      const order = await service.step('order', () => (ran.push('order'), { id: 7 }));
      const at = await service.step('charge', () => (ran.push('charge'), new Date(0)));
      if (fail) throw new Error('e-mail provider down');
      await service.step('email', () => void ran.push('email'));
      return { order: order.id, at: at.toISOString() };
    };
    const since = events.length;
    await expect(service.run(key, fn, { resumable: true })).rejects.toThrow('down');
    const recordKey = events.slice(since).find((event) => event.type === 'claimed')!.key!;
    expect(await store.inspect(recordKey)).toEqual({
      state: 'absent',
      steps: [
        { index: 0, name: 'order' },
        { index: 1, name: 'charge' },
      ],
    });
    const client = (store as RedisIdempotencyStore).client;
    expect(await client.exists(`${recordKey}:steps`)).toBe(1);
    fail = false;
    const done = { order: 7, at: new Date(0).toISOString() };
    await expect(service.run(key, fn, { resumable: true })).resolves.toEqual(done);
    expect(ran).toEqual(['order', 'charge', 'email']);
    const completed = await store.inspect(recordKey);
    expect(completed.state).toBe('completed');
    expect(await client.exists(`${recordKey}:steps`)).toBe(0);
    await expect(service.run(key, fn, { resumable: true })).resolves.toEqual(done);
    expect(ran).toEqual(['order', 'charge', 'email']);
  });
});
