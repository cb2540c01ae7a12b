import { Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Idempotent, IdempotencyModule } from '../../lib';
import { typeOrm } from '../support/orm-cases';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { describeTransactionalCompletion } from '../support/transactional-app';

// Commit together, rollback on throw, a fenced handler rolled back: the other adapters' suites
// (transactional-adapters.e2e-spec.ts) run the same requests.
describeTransactionalCompletion(typeOrm);

describe('transactional, misconfigured', () => {
  @Controller('misconfigured')
  class MisconfiguredController {
    @Post()
    @Idempotent({ transactional: true })
    create() {
      return {};
    }
  }

  const boot = async (options: Parameters<typeof IdempotencyModule.forRoot>[0]) => {
    @Module({
      imports: [IdempotencyModule.forRoot({ scope: 'public', ...options })],
      controllers: [MisconfiguredController],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    try {
      await app.init();
    } finally {
      await app.close();
    }
  };

  it('fails at boot on a store that cannot write in the app’s transaction', async () => {
    await expect(boot({})).rejects.toThrow(
      /`transactional` needs a store that writes in the app's transaction .*MemoryIdempotencyStore/,
    );
  });

  it('fails at boot when the app registered no TransactionHost', async () => {
    const table = uniqueTable('tx_misconfigured');
    const pool = await testPool();
    try {
      await expect(
        boot({ postgres: { connectionString: testPostgresUrl(), table, ensureSchema: true } }),
      ).rejects.toThrow(/register ClsModule with ClsPluginTransactional/);
    } finally {
      await dropTable(pool, table);
      await pool.end();
    }
  });
});
