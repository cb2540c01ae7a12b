import { Logger, type ModuleMetadata } from '@nestjs/common';
import { Field, ObjectType, Parent, ResolveField, Resolver } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyModule } from '../../lib';

/**
 * `@Idempotent()` on a `@ResolveField()` method. Nest runs no interceptor on field resolvers
 * unless `fieldResolverEnhancers` says so, and where it does, the library passes every field
 * that is not a mutation untouched (docs/graphql.md): the decorator never does anything there.
 * Issue 33 asks for no silent no-op; the boot check names field resolvers as fine. A method the
 * decorator was written on explicitly must fail boot or at least warn, as a provider method does.
 */
@ObjectType()
class Order {
  @Field()
  id!: string;
}

@Resolver(() => Order)
class OrderFieldsResolver {
  @ResolveField(() => String)
  @Idempotent()
  receipt(@Parent() order: Order): string {
    return `receipt of ${order.id}`;
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

describe('@Idempotent() on a @ResolveField() method', () => {
  it('is refused at boot, or warned about, never accepted in silence', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const booted = await boot({ providers: [OrderFieldsResolver] }).then(
        () => 'booted',
        (error: Error) => error.message,
      );
      const warned = warn.mock.calls.some(([message]) => /receipt/.test(String(message)));
      expect(booted === 'booted' && !warned ? 'accepted in silence' : 'refused or warned').toBe(
        'refused or warned',
      );
    } finally {
      warn.mockRestore();
    }
  });
});
