import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, type IdempotencyModuleOptions, IdempotencyService } from '../../lib';

const SECRET = 'resumable-nested-run-secret-0123456789abcdef';

/**
 * A run() that is not resumable, called inside a resumable run (a shared helper, a service
 * method with @IdempotentMethod()). Its own claim has no steps, so step() in it is refused, as
 * docs/steps.md says of any claimed run that is not resumable. Whether the module has a
 * `keyDerivationSecret` has nothing to do with steps and must not change that: without one, a
 * claimed run enters no async context of its own, and step() must not then fall through to the
 * outer run's, recording there a step that the inner run's replay will never call again.
 */
describe.each<[string, IdempotencyModuleOptions]>([
  ['with a keyDerivationSecret', { keyDerivationSecret: SECRET }],
  ['without a keyDerivationSecret', {}],
])('step() inside a run() that is not resumable, nested in a resumable one, %s', (_, extra) => {
  let app: INestApplicationContext;
  let service: IdempotencyService;

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot(extra)] })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    service = app.get(IdempotencyService);
  });
  afterAll(() => app?.close());

  it('is refused: the inner run is not resumable', async () => {
    const inner = await service
      .run(
        randomUUID(),
        () => service.run(randomUUID(), () => service.step('inner', () => 'recorded where?')),
        { resumable: true },
      )
      .catch((error: Error) => error);
    expect(inner).toBeInstanceOf(Error);
    expect((inner as Error).message).toMatch(/not resumable/);
  });

  it('leaves the outer run resumable: its retry replays its steps in their places', async () => {
    const outerKey = randomUUID();
    const innerKey = randomUUID();
    const ran: string[] = [];
    let fail = true;
    const fn = async () => {
      await service.step('order', () => ran.push('order'));
      // A helper that tries a step where it can, and goes on without one where it cannot.
      await service.run(innerKey, async () => {
        await service.step('receipt', () => ran.push('receipt')).catch(() => ran.push('plain'));
      });
      await service.step('email', () => ran.push('email'));
      if (fail) {
        fail = false;
        throw new Error('after the e-mail');
      }
      return 'done';
    };
    await expect(service.run(outerKey, fn, { resumable: true })).rejects.toThrow(
      'after the e-mail',
    );
    await expect(service.run(outerKey, fn, { resumable: true })).resolves.toBe('done');
    expect(ran.filter((step) => step === 'email')).toHaveLength(1);
  });
});
