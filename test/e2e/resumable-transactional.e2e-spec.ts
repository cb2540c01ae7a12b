import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClsModule } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool as PgPool } from 'pg';
import { DataSource } from 'typeorm';
import {
  IdempotencyEvent,
  IdempotencyInProgressError,
  IdempotencyModule,
  IdempotencyService,
  IdempotencyStore,
  MysqlIdempotencyStore,
  PostgresIdempotencyStore,
} from '../../lib';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deferred } from '../support/test-app';

/**
 * `resumable` with `transactional` on the SQL stores, PostgreSQL and MariaDB (the MySQL store):
 * one transaction per step, in which the step's writes (through TypeORM's `txHost.tx`) and its
 * record (the store's recordStepInTransaction, in its steps table) commit together. A failure
 * later keeps them and the retry resumes after them; a step that throws rolls back alone; the
 * handler between steps, and a step with `transactional: false`, run outside any transaction; a
 * zombie's record is refused and its step's writes roll back.
 */
interface Database {
  name: string;
  open(): Promise<{
    store: IdempotencyStore;
    dataSource: DataSource;
    /** `INSERT INTO effects (k, step) VALUES (<k>, <step>)` in this database's placeholders. */
    insert: string;
    rows(k: string): Promise<string[]>;
    /** Ends the record's lease now, as a stall past lockTtl would. */
    expire(recordKey: string): Promise<void>;
    close(): Promise<void>;
  }>;
}

const databases: Database[] = [
  {
    name: 'PostgreSQL',
    async open() {
      const pool: PgPool = await testPool();
      const [records, effects] = [uniqueTable('resumable_records'), uniqueTable('resumable_fx')];
      await pool.query(`CREATE TABLE "${effects}" (id serial PRIMARY KEY, k text, step text)`);
      const store = new PostgresIdempotencyStore(pool, { table: records, ensureSchema: true });
      return {
        store,
        dataSource: new DataSource({ type: 'postgres', url: testPostgresUrl() }),
        insert: `INSERT INTO "${effects}" (k, step) VALUES ($1, $2)`,
        rows: async (k) =>
          (
            await pool.query<{ step: string }>(
              `SELECT step FROM "${effects}" WHERE k = $1 ORDER BY id`,
              [k],
            )
          ).rows.map((row) => row.step),
        expire: async (recordKey) =>
          void (await pool.query(
            `UPDATE "${records}" SET expires_at = statement_timestamp() - interval '1 second'
             WHERE key = $1`,
            [recordKey],
          )),
        close: async () => {
          await store.close();
          for (const table of [records, effects]) await dropTable(pool, table);
          await pool.end();
        },
      };
    },
  },
  {
    name: 'MariaDB',
    async open() {
      const pool: MysqlPool = await testMysqlPool();
      const [records, effects] = [
        uniqueMysqlTable('resumable_rec'),
        uniqueMysqlTable('resumable_fx'),
      ];
      await pool.query(
        `CREATE TABLE \`${effects}\` (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64), step VARCHAR(32))`,
      );
      const store = new MysqlIdempotencyStore(pool, { table: records, ensureSchema: true });
      return {
        store,
        dataSource: new DataSource({ type: 'mariadb', url: testMysqlUrl() }),
        insert: `INSERT INTO \`${effects}\` (k, step) VALUES (?, ?)`,
        rows: async (k) => {
          const [rows] = await pool.query(
            `SELECT step FROM \`${effects}\` WHERE k = ? ORDER BY id`,
            [k],
          );
          return (rows as { step: string }[]).map((row) => row.step);
        },
        expire: async (recordKey) =>
          void (await pool.query(
            `UPDATE \`${records}\` SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND
             WHERE \`key\` = ?`,
            [recordKey],
          )),
        close: async () => {
          await store.close();
          for (const table of [records, effects]) await dropMysqlTable(pool, table);
          await pool.end();
        },
      };
    },
  },
];

describe.each(databases)(
  'resumable with transactional: one transaction per step ($name store, TypeORM)',
  (database) => {
    const events: IdempotencyEvent[] = [];
    let app: INestApplicationContext;
    let service: IdempotencyService;
    let txHost: TransactionHost<TransactionalAdapterTypeOrm>;
    let db: Awaited<ReturnType<Database['open']>>;

    beforeAll(async () => {
      db = await database.open();
      await db.store.whenReady?.(5_000);
      const dataSource = db.dataSource;
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
          IdempotencyModule.forRoot({ store: db.store, onEvent: (event) => events.push(event) }),
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
      await db?.dataSource.destroy();
      await db?.close();
    });

    const options = { resumable: true, transactional: true };
    const insert = (k: string, step: string) => txHost.tx.query(db.insert, [k, step]);

    it('commits each step with its record: a failure later keeps them, and the retry resumes after them', async () => {
      const k = randomUUID();
      let fail = true;
      const fn = async () => {
        await service.step('a', () => insert(k, 'a'));
        await service.step('b', () => insert(k, 'b'));
        if (fail) throw new Error('after b');
        await service.step('c', () => insert(k, 'c'));
        return 'done';
      };
      await expect(service.run(k, fn, options)).rejects.toThrow('after b');
      expect(await db.rows(k)).toEqual(['a', 'b']);
      fail = false;
      await expect(service.run(k, fn, options)).resolves.toBe('done');
      expect(await db.rows(k)).toEqual(['a', 'b', 'c']);
      // Completed: the steps went with the completion, the outcome replays.
      await expect(service.run(k, fn, options)).resolves.toBe('done');
      expect(await db.rows(k)).toEqual(['a', 'b', 'c']);
    });

    it("rolls back the writes of a step that throws, and only that step's", async () => {
      const k = randomUUID();
      let fail = true;
      const fn = async () => {
        await service.step('a', () => insert(k, 'a'));
        await service.step('b', async () => {
          await insert(k, 'b');
          if (fail) throw new Error('inside b');
        });
        return 'done';
      };
      await expect(service.run(k, fn, options)).rejects.toThrow('inside b');
      expect(await db.rows(k)).toEqual(['a']);
      fail = false;
      await expect(service.run(k, fn, options)).resolves.toBe('done');
      expect(await db.rows(k)).toEqual(['a', 'b']);
    });

    it('runs the handler between steps outside any transaction, and a step with transactional: false too', async () => {
      const seen: Record<string, boolean> = {};
      await service.run(
        randomUUID(),
        async () => {
          seen.handler = txHost.isTransactionActive();
          await service.step('in', () => (seen.step = txHost.isTransactionActive()));
          await service.step('out', () => (seen.network = txHost.isTransactionActive()), {
            transactional: false,
          });
        },
        options,
      );
      expect(seen).toEqual({ handler: false, step: true, network: false });
    });

    it("rolls back a zombie's step: its record is refused (fenced) and it throws IdempotencyInProgressError; the heir's stands", async () => {
      const k = randomUUID();
      const reached = deferred();
      const gate = deferred();
      let zombie = true;
      const fn = async () => {
        await service.step('a', () => insert(k, 'a'));
        await service.step('b', async () => {
          await insert(k, zombie ? 'b (zombie)' : 'b');
          if (zombie) {
            zombie = false;
            reached.resolve();
            await gate.promise;
          }
        });
        return 'done';
      };
      const since = events.length;
      const first = service.run(k, fn, options);
      await reached.promise;
      const recordKey = events.slice(since).find((event) => event.type === 'claimed')!.key!;
      // Its lease runs out (as after a stall past lockTtl): another run takes the key over.
      await db.expire(recordKey);
      await expect(service.run(k, fn, options)).resolves.toBe('done');
      gate.resolve();
      await expect(first).rejects.toBeInstanceOf(IdempotencyInProgressError);
      expect(await db.rows(k)).toEqual(['a', 'b']);
    });
  },
);
