import { Controller, INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxy,
  ClientProxyFactory,
  EventPattern,
  MicroserviceOptions,
  Transport,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib';
import { findFreePort } from '../support/redis-server';

/**
 * Nest runs every `@EventPattern` handler of a pattern (it chains them), so two modules may each
 * react to `order.created`. Controllers in different modules are often given the same name
 * (`OrderEventsController.handle`). Nest tells them apart (two classes, two modules), yet the
 * RPC route identity is `Controller.method` + patterns: both handlers claim the same record, and
 * the second waits for the first (event default `onConflict: 'wait'`) and then "replays" its
 * outcome: it never runs. The billing side effect happens, the shipping one is silently lost.
 */
const PATTERN = `order.created.${randomUUID().slice(0, 8)}`;
const ran: string[] = [];

function listenerModule(name: string) {
  @Controller()
  class OrderEventsController {
    @EventPattern(PATTERN)
    @Idempotent({ key: (ctx) => ctx.switchToRpc().getData<{ eventId: string }>().eventId })
    handle() {
      ran.push(name);
    }
  }
  @Module({ controllers: [OrderEventsController] })
  class ListenerModule {}
  return ListenerModule;
}
const BillingModule = listenerModule('billing');
const ShippingModule = listenerModule('shipping');

describe('two event handlers of one pattern in two modules, of one class name', () => {
  it('refuse to boot: they would share records, and one would be skipped as a duplicate', async () => {
    @Module({ imports: [IdempotencyModule.forRoot({}), BillingModule, ShippingModule] })
    class AppModule {}
    const port = await findFreePort();
    await expect(
      NestFactory.createMicroservice<MicroserviceOptions>(AppModule, {
        transport: Transport.TCP,
        options: { host: '127.0.0.1', port },
        logger: false,
        abortOnError: false,
      }).then((app: INestMicroservice) => app.init()),
    ).rejects.toThrow(/would share their idempotency records/);
  });

  it('run once each when they share nothing (distinct key spaces)', async () => {
    const spaced = (name: string) => {
      @Controller()
      class OrderEventsController {
        @EventPattern(PATTERN)
        @Idempotent({
          keySpace: `orders-${name}`,
          key: (ctx) => ctx.switchToRpc().getData<{ eventId: string }>().eventId,
        })
        handle() {
          ran.push(name);
          if (ran.length === 2) done();
        }
      }
      @Module({ controllers: [OrderEventsController] })
      class ListenerModule {}
      return ListenerModule;
    };
    let done!: () => void;
    const bothRan = new Promise<void>((resolve) => (done = resolve));
    @Module({ imports: [IdempotencyModule.forRoot({}), spaced('billing'), spaced('shipping')] })
    class AppModule {}
    const port = await findFreePort();
    const app: INestMicroservice = await NestFactory.createMicroservice<MicroserviceOptions>(
      AppModule,
      {
        transport: Transport.TCP,
        options: { host: '127.0.0.1', port },
        logger: false,
      },
    );
    await app.listen();
    const client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    }) as unknown as ClientProxy;
    try {
      ran.length = 0;
      await client.connect();
      client.emit(PATTERN, { eventId: randomUUID() });
      await bothRan;
      expect([...ran].sort()).toEqual(['billing', 'shipping']);
    } finally {
      await client.close();
      await app.close();
    }
  });
});
