import {
  Controller,
  Injectable,
  Logger,
  Module,
  type ModuleMetadata,
  Post,
  SetMetadata,
  type ExecutionContext,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Mutation, Query, Resolver } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { SubscribeMessage } from '@nestjs/websockets';
import {
  Idempotent,
  IdempotencyInterceptor,
  IdempotencyModule,
  type IdempotencyContextAdapter,
} from '../../lib';

/**
 * `@Idempotent()` where Nest never runs an interceptor is refused at boot, naming the method and
 * what to use instead; where Nest does run one (routes, resolvers, frameworks that intercept
 * provider methods), the app boots as before. BullMQ, @Cron and @SqsMessageHandler, with their
 * own packages: unintercepted-integrations.e2e-spec.ts.
 */

/** Boots a module with the memory store: resolves, or rejects with what init() threw. */
async function boot(metadata: ModuleMetadata): Promise<void> {
  const moduleRef = await Test.createTestingModule({
    ...metadata,
    imports: [IdempotencyModule.forRoot(), ...(metadata.imports ?? [])],
  }).compile();
  try {
    await moduleRef.init();
  } finally {
    await moduleRef.close();
  }
}

const USE_INSTEAD =
  /Use @IdempotentMethod\(\{ key \}\) on the method or IdempotencyService\.run\(\)/;

@Injectable()
class Billing {
  @Idempotent()
  async charge(orderId: string): Promise<string> {
    return orderId;
  }
}

@Injectable()
@Idempotent()
class Invoicing {
  async send(): Promise<void> {}
}

@Injectable()
class OptedOut {
  @Idempotent(false)
  async send(): Promise<void> {}
}

/** @OnEvent()'s metadata, written out: @nestjs/event-emitter is not installed here. */
@Injectable()
class OrderListener {
  @SetMetadata('EVENT_LISTENER_METADATA', [{ event: 'order.created' }])
  @Idempotent()
  async onCreated(): Promise<void> {}
}

@Controller('orders')
class OrdersController {
  @Post()
  @Idempotent()
  create() {
    return this.total();
  }

  @Idempotent()
  total() {
    return 1;
  }
}

@Resolver()
class OrdersResolver {
  @Query(() => Number)
  count() {
    return 1;
  }

  @Mutation(() => Number)
  @Idempotent()
  place() {
    return this.price();
  }

  @Idempotent()
  price() {
    return 1;
  }
}

@Resolver()
@Idempotent()
class IdempotentResolver {
  @Query(() => Number)
  count() {
    return 1;
  }

  @Mutation(() => Number)
  place() {
    return 1;
  }
}

/**
 * A gateway, and a golevelup RabbitMQ handler's metadata (written out: golevelup has no NestJS 12
 * release, and this file runs on both; rabbit-handlers-in-controllers.e2e-spec.ts uses its real
 * decorator): both frameworks run the method through Nest's interceptors.
 */
@Injectable()
class ChatGateway {
  @SubscribeMessage('say')
  @Idempotent()
  say() {
    return 'said';
  }
}

@Injectable()
class RabbitHandlers {
  @SetMetadata(Symbol('RABBIT_HANDLER'), { type: 'subscribe', queue: 'orders' })
  @Idempotent()
  onOrder() {
    return 'handled';
  }
}

/** Other methods of those classes: no framework runs them through an interceptor. */
@Injectable()
class ChatGatewayWithListener {
  @SetMetadata('websockets:message_mapping', true)
  @SetMetadata('message', 'say')
  @Idempotent()
  say() {
    return 'said';
  }

  @SetMetadata('EVENT_LISTENER_METADATA', [{ event: 'chat.closed' }])
  @Idempotent()
  async onClosed(): Promise<void> {}
}

@Injectable()
class RabbitHandlersWithHelper {
  @SetMetadata(Symbol('RABBIT_HANDLER'), { type: 'subscribe', queue: 'orders' })
  @Idempotent()
  onOrder() {
    return this.charge();
  }

  @Idempotent()
  charge() {
    return 'charged';
  }
}

const CHARGE = Symbol('charge');

@Injectable()
class SymbolBilling {
  @Idempotent()
  async [CHARGE](): Promise<void> {}
}

/** A controller whose class another module (scanned first) also lists as a provider. */
@Controller('refunds')
class RefundsController {
  @Post()
  @Idempotent()
  create() {
    return 1;
  }
}

@Module({ controllers: [RefundsController] })
class RefundsModule {}

/** A subclass that teaches the interceptor a context type of its own. */
@Injectable()
class CustomContexts extends IdempotencyInterceptor {
  protected override getAdapter(context: ExecutionContext): IdempotencyContextAdapter | undefined {
    return super.getAdapter(context);
  }
}

describe('@Idempotent() where Nest runs no interceptor', () => {
  it('is refused on a method of a provider, naming it and what to use instead', async () => {
    const booting = boot({ providers: [Billing] });
    await expect(booting).rejects.toThrow(
      /^IdempotencyModule: @Idempotent\(\) on Billing\.charge does nothing: it is a method of a provider/,
    );
    await expect(boot({ providers: [Billing] })).rejects.toThrow(USE_INSTEAD);
  });

  it('is refused on a provider class', async () => {
    await expect(boot({ providers: [Invoicing] })).rejects.toThrow(
      '@Idempotent() on Invoicing does nothing: it is a provider, not a controller or a GraphQL resolver',
    );
  });

  it('is refused on an @OnEvent() listener (its metadata)', async () => {
    await expect(boot({ providers: [OrderListener] })).rejects.toThrow(
      '@Idempotent() on OrderListener.onCreated does nothing',
    );
  });

  it('is refused on a controller method that is not a route, naming it; its routes are fine', async () => {
    await expect(boot({ controllers: [OrdersController] })).rejects.toThrow(
      '@Idempotent() on OrdersController.total does nothing: it is not a route, a message or ' +
        'event pattern, nor a gRPC method',
    );
  });

  it("is refused on a resolver's method that is no query, mutation or field", async () => {
    await expect(boot({ providers: [OrdersResolver] })).rejects.toThrow(
      '@Idempotent() on OrdersResolver.price does nothing: it is not a query, mutation, ' +
        'subscription or field of the resolver',
    );
  });

  it('names every such method at once', async () => {
    await expect(boot({ providers: [Billing, Invoicing] })).rejects.toThrow(
      /Billing\.charge[\s\S]*Invoicing does nothing/,
    );
  });

  it('is refused on a provider built by useFactory or useValue, as on its class', async () => {
    const factory = { provide: 'billing', useFactory: () => new Billing() };
    await expect(boot({ providers: [factory] })).rejects.toThrow(
      '@Idempotent() on Billing.charge does nothing: it is a method of a provider',
    );
    const value = { provide: 'billing', useValue: new Billing() };
    await expect(boot({ providers: [value] })).rejects.toThrow(
      '@Idempotent() on Billing.charge does nothing: it is a method of a provider',
    );
    const async = { provide: 'invoicing', useFactory: async () => new Invoicing() };
    await expect(boot({ providers: [async] })).rejects.toThrow(
      '@Idempotent() on Invoicing does nothing: it is a provider',
    );
  });

  it('is refused on a method named by a symbol', async () => {
    await expect(boot({ providers: [SymbolBilling] })).rejects.toThrow(
      '@Idempotent() on SymbolBilling[Symbol(charge)] does nothing',
    );
  });

  it("is refused on a gateway's or a RabbitMQ handler's other methods, not on the handlers", async () => {
    const refusal = await boot({
      providers: [ChatGatewayWithListener, RabbitHandlersWithHelper],
    }).then(
      () => 'booted',
      (error: Error) => error.message,
    );
    expect(refusal).toMatch(
      /ChatGatewayWithListener\.onClosed does nothing[\s\S]*RabbitHandlersWithHelper\.charge does nothing/,
    );
    expect(refusal).not.toMatch(/\.say |\.onOrder /);
  });

  it('boots a controller whose class a module scanned before lists as a provider', async () => {
    await expect(
      boot({ providers: [RefundsController], imports: [RefundsModule] }),
    ).resolves.toBeUndefined();
  });

  it('boots where an interceptor runs, or where @Idempotent(false) opts out', async () => {
    await expect(
      boot({ providers: [IdempotentResolver, OptedOut, ChatGateway, RabbitHandlers] }),
    ).resolves.toBeUndefined();
  });

  it('warns instead of refusing when a subclass overrides getAdapter()', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      await expect(
        boot({ providers: [Billing, { provide: APP_INTERCEPTOR, useClass: CustomContexts }] }),
      ).resolves.toBeUndefined();
      expect(warn).toHaveBeenCalledWith(
        expect.stringMatching(
          /Billing\.charge does nothing[\s\S]*CustomContexts overrides getAdapter/,
        ),
      );
    } finally {
      warn.mockRestore();
    }
  });
});
