import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClsModule } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import {
  ClaimRequest,
  ClaimResult,
  CompleteOptions,
  IdempotencyEvent,
  IdempotencyInProgressError,
  IdempotencyModule,
  IdempotencyService,
  PostgresIdempotencyStore,
  StoredResponse,
  StoredStep,
} from '../../lib';
import { queryInTransaction, resultRows } from '../../lib/stores/sql/transaction';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deferred } from '../support/test-app';

const records = uniqueTable('resumable_tx_records');
const steps = `${records}_test_steps`;
const effects = uniqueTable('resumable_tx_effects');

/**
 * The PostgreSQL store with steps in a table of the test's own, written through the app's
 * transaction and fenced by the owner token as the store contract says: what the claim core's
 * per-step transactions are tested against here. (The store's own steps table is tested by the
 * contract suite on the store.)
 */
class StepsOnPostgres extends PostgresIdempotencyStore {
  private readonly insert = `INSERT INTO "${steps}" (key, idx, name, meta, body)
    SELECT $1, $3, $4, $5, $6 FROM "${records}"
    WHERE key = $1 AND state = 'p' AND owner = $2 AND expires_at > statement_timestamp()
    ON CONFLICT (key, idx) DO UPDATE SET name = excluded.name, meta = excluded.meta,
      body = excluded.body
    RETURNING 1`;

  override async claim(key: string, request: ClaimRequest): Promise<ClaimResult> {
    const result = await super.claim(key, { ...request, resumable: undefined });
    if (result.status !== 'claimed' || !request.resumable) return result;
    const { rows } = await this.pool.query<{
      idx: number;
      name: string;
      meta: string;
      body: Buffer;
    }>(`SELECT idx, name, meta, body FROM "${steps}" WHERE key = $1`, [key]);
    const found = rows.map((row) => ({
      index: row.idx,
      name: row.name,
      result: { meta: row.meta, body: row.body },
    }));
    return { status: 'claimed', steps: found };
  }

  override async complete(
    key: string,
    token: string,
    response: StoredResponse,
    ttlMs: number,
    options?: CompleteOptions,
  ): Promise<boolean> {
    const done = await super.complete(key, token, response, ttlMs);
    if (done && options?.clearSteps) {
      await this.pool.query(`DELETE FROM "${steps}" WHERE key = $1`, [key]);
    }
    return done;
  }

  override async recordStep(key: string, token: string, step: StoredStep): Promise<boolean> {
    const { rowCount } = await this.pool.query(this.insert, this.values(key, token, step));
    return rowCount === 1;
  }

  override async recordStepInTransaction(
    tx: unknown,
    key: string,
    token: string,
    step: StoredStep,
  ): Promise<boolean> {
    const result = await queryInTransaction(tx, this.insert, this.values(key, token, step), '$n');
    return resultRows(result).length === 1;
  }

  private values(key: string, token: string, step: StoredStep): unknown[] {
    return [key, token, step.index, step.name, step.result.meta, step.result.body];
  }
}

describe('resumable with transactional: one transaction per step (PostgreSQL, TypeORM)', () => {
  const events: IdempotencyEvent[] = [];
  let app: INestApplicationContext;
  let service: IdempotencyService;
  let txHost: TransactionHost<TransactionalAdapterTypeOrm>;
  let pool: Pool;
  let store: StepsOnPostgres;

  beforeAll(async () => {
    pool = await testPool();
    await pool.query(`CREATE TABLE "${effects}" (id serial PRIMARY KEY, key text, step text)`);
    store = new StepsOnPostgres(pool, { table: records, ensureSchema: true });
    await store.whenReady?.(5_000);
    await pool.query(
      `CREATE TABLE "${steps}" (key text, idx int, name text, meta text, body bytea,
        PRIMARY KEY (key, idx))`,
    );
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
        IdempotencyModule.forRoot({ store, onEvent: (event) => events.push(event) }),
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
    await store?.close();
    for (const table of [effects, steps, records]) await dropTable(pool, table);
    await pool.end();
  });

  const options = { resumable: true, transactional: true };
  const insert = (key: string, step: string) =>
    txHost.tx.query(`INSERT INTO "${effects}" (key, step) VALUES ($1, $2)`, [key, step]);
  const rows = async (key: string) =>
    (
      await pool.query<{ step: string }>(
        `SELECT step FROM "${effects}" WHERE key = $1 ORDER BY id`,
        [key],
      )
    ).rows.map((row) => row.step);

  it('commits each step with its record: a failure later keeps them, and the retry resumes after them', async () => {
    const key = randomUUID();
    let fail = true;
    const fn = async () => {
      await service.step('a', () => insert(key, 'a'));
      await service.step('b', () => insert(key, 'b'));
      if (fail) throw new Error('after b');
      await service.step('c', () => insert(key, 'c'));
      return 'done';
    };
    await expect(service.run(key, fn, options)).rejects.toThrow('after b');
    expect(await rows(key)).toEqual(['a', 'b']);
    fail = false;
    await expect(service.run(key, fn, options)).resolves.toBe('done');
    expect(await rows(key)).toEqual(['a', 'b', 'c']);
  });

  it("rolls back the writes of a step that throws, and only that step's", async () => {
    const key = randomUUID();
    let fail = true;
    const fn = async () => {
      await service.step('a', () => insert(key, 'a'));
      await service.step('b', async () => {
        await insert(key, 'b');
        if (fail) throw new Error('inside b');
      });
      return 'done';
    };
    await expect(service.run(key, fn, options)).rejects.toThrow('inside b');
    expect(await rows(key)).toEqual(['a']);
    fail = false;
    await expect(service.run(key, fn, options)).resolves.toBe('done');
    expect(await rows(key)).toEqual(['a', 'b']);
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

  it("rolls back a zombie's step: its record is refused (fenced) and it throws IdempotencyInProgressError", async () => {
    const key = randomUUID();
    const reached = deferred();
    const gate = deferred();
    let zombie = true;
    const fn = async () => {
      await service.step('a', () => insert(key, 'a'));
      await service.step('b', async () => {
        await insert(key, zombie ? 'b (zombie)' : 'b');
        if (zombie) {
          zombie = false;
          reached.resolve();
          await gate.promise;
        }
      });
      return 'done';
    };
    const since = events.length;
    const first = service.run(key, fn, options);
    await reached.promise;
    const recordKey = events.slice(since).find((event) => event.type === 'claimed')!.key!;
    // Its lease runs out (as after a stall past lockTtl): another run takes the key over.
    await pool.query(
      `UPDATE "${records}" SET expires_at = statement_timestamp() - interval '1 second' WHERE key = $1`,
      [recordKey],
    );
    await expect(service.run(key, fn, options)).resolves.toBe('done');
    gate.resolve();
    await expect(first).rejects.toBeInstanceOf(IdempotencyInProgressError);
    expect(await rows(key)).toEqual(['a', 'b']);
  });
});
