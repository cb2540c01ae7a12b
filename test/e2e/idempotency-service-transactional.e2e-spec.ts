import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClsModule } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import {
  IdempotencyEvent,
  IdempotencyInProgressError,
  IdempotencyModule,
  IdempotencyService,
  IdempotencyStore,
} from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deferred } from '../support/test-app';

const records = uniqueTable('run_tx_records');
const effects = uniqueTable('run_tx_effects');

describe('IdempotencyService.run() with transactional: true on PostgreSQL', () => {
  const bus = new EventEmitter();
  let app: INestApplicationContext;
  let service: IdempotencyService;
  let txHost: TransactionHost<TransactionalAdapterTypeOrm>;
  let pool: Pool;

  beforeAll(async () => {
    pool = await testPool();
    await pool.query(`CREATE TABLE "${effects}" (id serial PRIMARY KEY, key text NOT NULL)`);
    const dataSource = new DataSource({ type: 'postgres', url: testPostgresUrl() });
    @Module({
      providers: [{ provide: DataSource, useFactory: () => dataSource.initialize() }],
      exports: [DataSource],
    })
    class DatabaseModule {}
    @Module({
      imports: [
        DatabaseModule,
        ClsModule.forRoot({
          plugins: [
            new ClsPluginTransactional({
              imports: [DatabaseModule],
              adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }),
            }),
          ],
        }),
        IdempotencyModule.forRoot({
          postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
          onEvent: (event) => bus.emit(event.type, event),
        }),
      ],
    })
    class AppModule {}
    app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    await app.init();
    service = app.get(IdempotencyService);
    txHost = app.get(TransactionHost);
  });
  afterAll(async () => {
    await app?.close();
    await app?.get(DataSource).destroy();
    await dropTable(pool, effects);
    await dropTable(pool, records);
    await pool.end();
  });

  const insert = (key: string) =>
    txHost.tx.query(`INSERT INTO "${effects}" (key) VALUES ($1)`, [key]);
  const rows = async (key: string) =>
    Number(
      (await pool.query(`SELECT count(*) FROM "${effects}" WHERE key = $1`, [key])).rows[0].count,
    );
  const nextEvent = async (type: IdempotencyEvent['type']) =>
    ((await once(bus, type)) as [IdempotencyEvent])[0];

  it("commits fn's writes with the record: a later call returns the result, no second row", async () => {
    const key = randomUUID();
    const fn = async () => {
      await insert(key);
      return { sent: new Date(0) };
    };
    await expect(service.run(key, fn, { transactional: true })).resolves.toEqual({
      sent: new Date(0),
    });
    await expect(service.run(key, fn, { transactional: true })).resolves.toEqual({
      sent: new Date(0),
    });
    expect(await rows(key)).toBe(1);
  });

  it("rolls fn's writes back when it throws, and releases the key", async () => {
    const key = randomUUID();
    const failure = new Error('after the insert');
    const failing = async () => {
      await insert(key);
      throw failure;
    };
    await expect(service.run(key, failing, { transactional: true })).rejects.toBe(failure);
    expect(await rows(key)).toBe(0);
    await service.run(key, () => insert(key).then(() => 'ok'), { transactional: true });
    expect(await rows(key)).toBe(1);
  });

  it("rolls a fenced zombie's writes back: only the call that took the key over commits", async () => {
    const key = randomUUID();
    const gate = deferred();
    const claimed = nextEvent('claimed');
    const zombie = service.run(
      key,
      async () => {
        await insert(key);
        await gate.promise;
        return 'zombie';
      },
      { transactional: true },
    );
    const { key: recordKey } = await claimed;
    // Its lease is gone (as after a stall past lockTtl): another call takes the key over.
    await app.get(IdempotencyStore).delete(recordKey!);
    const winner = () => insert(key).then(() => 'winner');
    await expect(service.run(key, winner, { transactional: true })).resolves.toBe('winner');
    gate.resolve();
    await expect(zombie).rejects.toBeInstanceOf(IdempotencyInProgressError);
    expect(await rows(key)).toBe(1);
    await expect(service.run(key, winner, { transactional: true })).resolves.toBe('winner');
  });
});
