import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, IdempotencyRecords, IdempotencyService } from '../../lib';

/**
 * Operators and the records of `IdempotencyService.run()`. run() keys are any text (docs/jobs.md:
 * "any text: they are hashed with the scope"), events name their route `run:<scope>`, and a
 * resumable run whose code changed fails with IdempotencyStepMismatchError, whose message says to
 * delete the record with IdempotencyRecords.delete() to run it from its first step. That must be
 * possible for every key run() takes, not only for keys a route would take (printable ASCII).
 */
describe('IdempotencyRecords on run() records', () => {
  let app: INestApplicationContext;
  let service: IdempotencyService;
  let records: IdempotencyRecords;

  beforeAll(async () => {
    @Module({ imports: [IdempotencyModule.forRoot()] })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    service = app.get(IdempotencyService);
    records = app.get(IdempotencyRecords);
  });
  afterAll(() => app?.close());

  it.each([
    ['an ASCII key', 'invoice-42'],
    ['a key with accents', 'facture-été-42'],
    ['a key with surrounding spaces', ' invoice-43 '],
  ])(
    'unsticks a resumable run whose code changed, keyed by %s, as the mismatch error says',
    async (_, key) => {
      const resumable = { resumable: true, scope: 'invoices' };
      await expect(
        service.run(
          key,
          async () => {
            await service.step('render', () => 'pdf');
            throw new Error('mailer down');
          },
          resumable,
        ),
      ).rejects.toThrow('mailer down');
      // A deploy renamed the first step: the retry fails, naming IdempotencyRecords.delete().
      const renamed = () => service.step('render-v2', () => 'pdf v2');
      await expect(service.run(key, renamed, resumable)).rejects.toThrow(
        /IdempotencyRecords\.delete/,
      );
      await expect(records.delete({ key, route: 'run:invoices' })).resolves.toBe(true);
      await expect(service.run(key, renamed, resumable)).resolves.toBe('pdf v2');
    },
  );
});
