import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Controller, Headers, INestApplication, Module, Post, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { Idempotent, IdempotencyEvent, IdempotencyModule } from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { listen } from '../support/http-app';
import { PLATFORMS, Platform, post } from '../support/test-app';
import { transactionalImports } from '../support/transactional/harness';

/**
 * `transactional: true` promises that the handler's writes and the record commit together or not
 * at all ("exactly one payment row per key, always"), on every entry point and adapter
 * (transactional.e2e-spec.ts). These are the paths where the record is NOT written but the
 * transaction could still commit, or where a rolled-back request could keep its key; and the
 * set-ups that cannot keep the promise, refused at boot.
 */
const records = uniqueTable('tx_failures_records');
const payments = uniqueTable('tx_failures_payments');
const attempts = new Map<string, number>();

@Controller('payments')
class PaymentsController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  private async insert(key: string): Promise<number> {
    const [row] = await this.txHost.tx.query<{ id: number }[]>(
      `INSERT INTO "${payments}" (key) VALUES ($1) RETURNING id`,
      [key],
    );
    return row.id;
  }

  /** A receipt that happens to be larger than the route's maxResponseBytes. */
  @Post('large')
  @Idempotent({ transactional: true, maxResponseBytes: 64 })
  async large(@Headers('idempotency-key') key: string) {
    const id = await this.insert(key);
    return { payment: id, receipt: 'x'.repeat(200) };
  }

  /** A response the codec cannot store (a bigint id, as `pg` int8 columns come back with some configs). */
  @Post('bigint')
  @Idempotent({ transactional: true })
  async bigint(@Headers('idempotency-key') key: string) {
    await this.insert(key);
    return { payment: BigInt(1) };
  }

  /**
   * Swallows a database error on its first attempt (a common "insert or ignore" pattern), which
   * aborts the transaction: the completion cannot be written, the transaction rolls back, the
   * client gets 503 with Retry-After: 1. Later attempts succeed.
   */
  @Post('aborted')
  @Idempotent({ transactional: true, lockTtl: 15_000 })
  async aborted(@Headers('idempotency-key') key: string) {
    const attempt = (attempts.get(key) ?? 0) + 1;
    attempts.set(key, attempt);
    const id = await this.insert(key);
    if (attempt === 1) {
      try {
        await this.txHost.tx.query('SELECT 1 / 0');
      } catch {
        // ignored by the handler, as "insert or ignore" code does
      }
    }
    return { payment: id, attempt };
  }
}

@Controller('ledger')
class LedgerController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  /**
   * Two writes that must land together (a debit and its credit): the route is transactional, so
   * the second failing must undo the first. The client picks whether the second fails.
   */
  @Post('transfer')
  @Idempotent({ transactional: true })
  async transfer(@Headers('x-ref') ref: string, @Headers('x-fail') fail?: string) {
    await this.txHost.tx.query(`INSERT INTO "${payments}" (key) VALUES ($1)`, [`debit:${ref}`]);
    if (fail) throw new Error('credit failed');
    await this.txHost.tx.query(`INSERT INTO "${payments}" (key) VALUES ($1)`, [`credit:${ref}`]);
    return { ref };
  }

  /** A write whose deferred constraint fails at COMMIT, after the completion was written. */
  @Post('deferred')
  @Idempotent({ transactional: true })
  async deferred(@Headers('x-ref') ref: string) {
    await this.txHost.tx.query(`INSERT INTO "${deferredTable}" (ref) VALUES ($1), ($1)`, [ref]);
    return { ref };
  }
}

/** Answers through @Res() (a file download, a custom framing...): refused at boot. */
@Controller('self-answered')
class SelfAnsweredController {
  @Post()
  @Idempotent({ transactional: true })
  selfAnswered(@Res() response: { status(code: number): { send(body: unknown): void } }) {
    response.status(201).send({ committed: true });
  }
}

const deferredTable = uniqueTable('tx_failures_deferred');

async function start(platform: Platform, events: IdempotencyEvent[]): ReturnType<typeof listen> {
  const dataSource = new DataSource({ type: 'postgres', url: testPostgresUrl() });
  @Module({
    imports: transactionalImports(
      { provide: DataSource, useFactory: () => dataSource.initialize() },
      (dataSourceToken) => new TransactionalAdapterTypeOrm({ dataSourceToken }),
      {
        postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
        scope: 'public',
        onEvent: (event) => events.push(event),
      },
    ),
    controllers: [PaymentsController, LedgerController],
  })
  class AppModule {}
  return listen(platform, AppModule);
}

describe.each(PLATFORMS)('transactional failures on %s', (platform) => {
  const events: IdempotencyEvent[] = [];
  let pool: Pool;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    pool = await testPool();
    await pool.query(`CREATE TABLE IF NOT EXISTS "${payments}" (id serial PRIMARY KEY, key text)`);
    await pool.query(
      `CREATE TABLE IF NOT EXISTS "${deferredTable}" (ref text UNIQUE DEFERRABLE INITIALLY DEFERRED)`,
    );
    ({ app, url } = await start(platform, events));
  });
  afterAll(async () => {
    await app?.close();
    await app?.get(DataSource).destroy();
    await dropTable(pool, payments);
    await dropTable(pool, deferredTable);
    await dropTable(pool, records);
    await pool.end();
  });

  const rows = async (key: string) =>
    Number(
      (await pool.query(`SELECT count(*) FROM "${payments}" WHERE key = $1`, [key])).rows[0].count,
    );

  it('never commits a payment whose response cannot be stored (over maxResponseBytes): a retry must not pay twice', async () => {
    const key = randomUUID();
    const first = await post(url, '/payments/large', { key });
    const retry = await post(url, '/payments/large', { key });
    // Rolled back (a record could not be stored with it): an error, and no payment, every time.
    expect({ first: first.status, retry: retry.status, rows: await rows(key) }).toEqual({
      first: 500,
      retry: 500,
      rows: 0,
    });
  });

  it('never answers 500 for a payment it committed, nor lets the retry commit another', async () => {
    const key = randomUUID();
    const first = await post(url, '/payments/bigint', { key });
    const afterFirst = await rows(key);
    await post(url, '/payments/bigint', { key });
    const afterRetry = await rows(key);
    expect({
      first: first.status,
      committedBehindAnError: first.status >= 400 && afterFirst > 0,
      paymentsForOneKey: afterRetry,
    }).toEqual({ first: 500, committedBehindAnError: false, paymentsForOneKey: 0 });
  });

  it('frees the key of a rolled-back request: the retry its Retry-After asks for runs, not 409', async () => {
    const key = randomUUID();
    const first = await post(url, '/payments/aborted', { key });
    expect(first.status).toBe(503);
    expect(await rows(key)).toBe(0); // rolled back, as promised
    // Released at once: the retry runs, however soon it comes.
    const retry = await post(url, '/payments/aborted', { key });
    expect({ retry: retry.status, body: retry.text }).toEqual({
      retry: 201,
      body: expect.stringContaining('"attempt":2') as string,
    });
  });

  it('keeps a transactional route atomic for a request without a key (the client cannot opt out of the transaction)', async () => {
    const keyed = randomUUID();
    const withKey = await post(url, '/ledger/transfer', {
      key: randomUUID(),
      headers: { 'x-ref': keyed, 'x-fail': '1' },
    });
    const keyless = randomUUID();
    const withoutKey = await post(url, '/ledger/transfer', {
      headers: { 'x-ref': keyless, 'x-fail': '1' },
    });
    expect({ withKey: withKey.status, withoutKey: withoutKey.status }).toEqual({
      withKey: 500,
      withoutKey: 500,
    });
    // With a key the debit is rolled back; without one, it must be too.
    expect({
      debitsWithKey: await rows(`debit:${keyed}`),
      debitsWithoutKey: await rows(`debit:${keyless}`),
    }).toEqual({ debitsWithKey: 0, debitsWithoutKey: 0 });
  });

  it('reports no `completed` event for a request whose transaction then failed to commit', async () => {
    const key = randomUUID();
    events.length = 0;
    const answer = await post(url, '/ledger/deferred', { key, headers: { 'x-ref': key } });
    expect(answer.status).toBe(500); // the deferred unique check fails at COMMIT
    expect(events.map((event) => event.type)).toEqual(['claimed', 'released']);
  });
});

describe('transactional with a handler that answers itself', () => {
  it('refuses to boot: its response would leave before the commit', async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
          scope: 'public',
        }),
      ],
      controllers: [SelfAnsweredController],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await expect(app.init()).rejects.toThrow(/answers through @Res\(\) or @Next\(\)/);
    await app.close();
  });
});

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
