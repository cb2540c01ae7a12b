import { RabbitSubscribe } from '@golevelup/nestjs-rabbitmq';
import { Controller, Injectable, type ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyModule } from '../../lib';

/**
 * @golevelup/nestjs-rabbitmq runs `@RabbitSubscribe()` / `@RabbitRPC()` handlers through Nest's
 * interceptors, on providers and, with `enableControllerDiscovery: true` (its documented option),
 * on controllers too. The boot check of `@Idempotent()` leaves the provider form alone (the
 * interceptor sees its messages); the same handler moved to a controller must boot the same way,
 * not be refused as "not a route, a message or event pattern, nor a gRPC method".
 */

const binding = { exchange: 'orders', routingKey: 'order.created', queue: 'orders' };

@Injectable()
class OrdersHandlers {
  @RabbitSubscribe(binding)
  @Idempotent()
  onOrder() {
    return 'handled';
  }
}

@Controller()
class OrdersMessagesController {
  @RabbitSubscribe(binding)
  @Idempotent()
  onOrder() {
    return 'handled';
  }
}

async function boot(metadata: ModuleMetadata): Promise<void> {
  const moduleRef = await Test.createTestingModule({
    ...metadata,
    imports: [IdempotencyModule.forRoot()],
  }).compile();
  try {
    await moduleRef.init();
  } finally {
    await moduleRef.close();
  }
}

describe('@Idempotent() on a golevelup RabbitMQ handler', () => {
  it('boots on a provider', async () => {
    await expect(boot({ providers: [OrdersHandlers] })).resolves.toBeUndefined();
  });

  it('boots on a controller (enableControllerDiscovery), as on a provider', async () => {
    await expect(boot({ controllers: [OrdersMessagesController] })).resolves.toBeUndefined();
  });
});
