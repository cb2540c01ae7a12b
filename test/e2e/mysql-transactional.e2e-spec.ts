/**
 * `transactional: true` on the MySQL/MariaDB store through @nestjs-cls/transactional and TypeORM
 * (mysql2 driver), on real HTTP: the record's completion is written in the handler's transaction.
 */
import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Controller, Headers, HttpException, INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ClsModule } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'mysql2/promise';
import { DataSource } from 'typeorm';
import { Idempotent, IdempotencyEvent, IdempotencyModule, IdempotencyRecords } from '../../lib';
import { dropMysqlTable, testMysqlPool, testMysqlUrl, uniqueMysqlTable } from '../support/mysql';
import { deferred, PLATFORMS, Platform, post } from '../support/test-app';

const records = uniqueMysqlTable('tx_records');
const payments = uniqueMysqlTable('tx_payments');
/** Gates that hold the slow handler open until a test releases it. */
const gates: { promise: Promise<void>; started: () => void }[] = [];

@Controller('payments')
class PaymentsController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  private async insert(key: string): Promise<number> {
    const result = await this.txHost.tx.query<{ insertId: number }>(
      `INSERT INTO \`${payments}\` (k) VALUES (?)`,
      [key],
    );
    return result.insertId;
  }

  @Post()
  @Idempotent({ transactional: true })
  async create(@Headers('idempotency-key') key: string) {
    return { payment: await this.insert(key) };
  }

  @Post('failing')
  @Idempotent({ transactional: true })
  async failing(@Headers('idempotency-key') key: string, @Headers('x-fail') fail?: string) {
    await this.insert(key);
    if (fail) throw new HttpException('declined', 402);
    return { ok: true };
  }

  @Post('slow')
  @Idempotent({ transactional: true })
  async slow(@Headers('idempotency-key') key: string) {
    const id = await this.insert(key);
    const gate = gates.shift();
    gate?.started();
    await gate?.promise;
    return { payment: id };
  }
}

async function start(platform: Platform, events: IdempotencyEvent[]): Promise<INestApplication> {
  const dataSource = new DataSource({ type: 'mysql', url: testMysqlUrl() });
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
        mysql: { uri: testMysqlUrl(), table: records, ensureSchema: true },
        scope: 'public',
        onEvent: (event) => events.push(event),
      }),
    ],
    controllers: [PaymentsController],
  })
  class AppModule {}
  const app =
    platform === 'fastify'
      ? await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false })
      : await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  app.enableShutdownHooks();
  return app;
}

describe.each(PLATFORMS)('transactional completion on MariaDB (TypeORM) on %s', (platform) => {
  const events: IdempotencyEvent[] = [];
  let pool: Pool;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    pool = await testMysqlPool();
    await pool.query(
      `CREATE TABLE IF NOT EXISTS \`${payments}\` (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64)) ENGINE=InnoDB`,
    );
    app = await start(platform, events);
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });
  afterAll(async () => {
    await app?.close();
    await app?.get(DataSource).destroy();
    await dropMysqlTable(pool, payments);
    await dropMysqlTable(pool, records);
    await pool.end();
  });

  const rows = async (key: string) => {
    const [found] = await pool.query(`SELECT COUNT(*) AS n FROM \`${payments}\` WHERE k = ?`, [
      key,
    ]);
    return Number((found as { n: number }[])[0].n);
  };

  it('commits the payment and the record together; a retry replays it', async () => {
    const key = randomUUID();
    const first = await post(url, '/payments', { key });
    expect(first.status).toBe(201);
    const retry = await post(url, '/payments', { key });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(await rows(key)).toBe(1);
  });

  it('rolls the payment back when the handler fails, and a retry runs once', async () => {
    const key = randomUUID();
    const failed = await post(url, '/payments/failing', { key, headers: { 'x-fail': '1' } });
    expect(failed.status).toBe(402);
    expect(await rows(key)).toBe(0);
    expect((await post(url, '/payments/failing', { key })).status).toBe(201);
    expect(await rows(key)).toBe(1);
  });

  it('rolls a fenced handler’s writes back; its client gets 409, never a 2xx', async () => {
    const key = randomUUID();
    const gate = deferred();
    const started = deferred();
    gates.push({ promise: gate.promise, started: started.resolve });
    const zombie = post(url, '/payments/slow', { key });
    await started.promise;
    // An operator frees the key (as a lease expiry would): another request takes it over.
    const route = events.filter((event) => event.type === 'claimed').at(-1)!.route;
    expect(await app.get(IdempotencyRecords).delete({ key, route })).toBe(true);
    gates.push({ promise: Promise.resolve(), started: () => undefined });
    const heir = await post(url, '/payments/slow', { key });
    expect(heir.status).toBe(201);
    gate.resolve();
    const answer = await zombie;
    expect(answer.status).toBe(409);
    expect(await rows(key)).toBe(1);
    const replay = await post(url, '/payments/slow', { key });
    expect(replay.text).toBe(heir.text);
    expect(events.filter((event) => event.type === 'fenced')).not.toHaveLength(0);
  });
});
