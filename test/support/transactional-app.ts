import { ClsPluginTransactional, TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapter } from '@nestjs-cls/transactional';
import { Controller, Headers, HttpException, INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ClsModule } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { Idempotent, IdempotencyEvent, IdempotencyModule, IdempotencyRecords } from '../../lib';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from './postgres';
import { deferred, PLATFORMS, Platform, post } from './test-app';

/**
 * An ORM as an app uses it with `@nestjs-cls/transactional`: the suites below run the same
 * requests through each (TypeORM, Drizzle, Knex, Kysely, Prisma), so a new adapter is one case.
 */
export interface OrmCase {
  /** The ORM's name, in test titles. */
  name: string;
  /** Connects to the database at `url`; `table` (id serial, key text) exists by then. */
  open(url: string, table: string): Promise<OpenOrm>;
}

/** A connected ORM. */
export interface OpenOrm {
  /** What the app provides under the adapter's injection token (a DataSource, a Knex...). */
  instance: unknown;
  /** The `@nestjs-cls/transactional` adapter that finds {@link instance} under `token`. */
  adapter(token: string): TransactionalAdapter<unknown, unknown, unknown>;
  /** Inserts a row for `key` through `tx` (what `txHost.tx` is); resolves its id. */
  insert(tx: unknown, key: string): Promise<number>;
  /** Closes the ORM's connections. */
  close(): Promise<void>;
}

/** The injection token the test apps provide the ORM's instance under. */
const ORM = 'ORM_INSTANCE';

/** Gates that hold the slow handler open until a test releases it. */
interface Gate {
  promise: Promise<void>;
  started: () => void;
}

/** An app whose payments are written through `orm`'s transaction, on the PostgreSQL store. */
async function start(
  orm: OpenOrm,
  platform: Platform,
  records: string,
  gates: Gate[],
  events: IdempotencyEvent[],
): Promise<INestApplication> {
  @Controller('payments')
  class PaymentsController {
    constructor(private readonly txHost: TransactionHost) {}

    @Post()
    @Idempotent({ transactional: true })
    async create(@Headers('idempotency-key') key: string) {
      return { payment: await orm.insert(this.txHost.tx, key) };
    }

    @Post('failing')
    @Idempotent({ transactional: true })
    async failing(@Headers('idempotency-key') key: string, @Headers('x-fail') fail?: string) {
      await orm.insert(this.txHost.tx, key);
      if (fail) throw new HttpException('declined', 402);
      return { ok: true };
    }

    @Post('slow')
    @Idempotent({ transactional: true })
    async slow(@Headers('idempotency-key') key: string) {
      const id = await orm.insert(this.txHost.tx, key);
      const gate = gates.shift();
      gate?.started();
      await gate?.promise;
      return { payment: id };
    }
  }

  @Module({ providers: [{ provide: ORM, useValue: orm.instance }], exports: [ORM] })
  class DatabaseModule {}
  @Module({
    imports: [
      DatabaseModule,
      ClsModule.forRoot({
        plugins: [
          new ClsPluginTransactional({ imports: [DatabaseModule], adapter: orm.adapter(ORM) }),
        ],
      }),
      IdempotencyModule.forRoot({
        postgres: { connectionString: testPostgresUrl(), table: records, ensureSchema: true },
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
  return app;
}

/**
 * Transactional completion through `orm` over real HTTP, on Express and Fastify: the handler's
 * row and the record commit together, a failure rolls both back (the key freed, a retry runs),
 * and a fenced handler's row never commits.
 */
export function describeTransactionalCompletion(orm: OrmCase): void {
  describe.each(PLATFORMS)(`transactional completion with ${orm.name} on %s`, (platform) => {
    const records = uniqueTable('tx_records');
    const payments = uniqueTable('tx_payments');
    const events: IdempotencyEvent[] = [];
    const gates: Gate[] = [];
    let pool: Pool;
    let opened: OpenOrm | undefined;
    let app: INestApplication | undefined;
    let url: string;

    beforeAll(async () => {
      pool = await testPool();
      await pool.query(`CREATE TABLE "${payments}" (id serial PRIMARY KEY, key text)`);
      opened = await orm.open(testPostgresUrl(), payments);
      app = await start(opened, platform, records, gates, events);
      url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    });
    afterAll(async () => {
      await app?.close();
      await opened?.close();
      await dropTable(pool, payments);
      await dropTable(pool, records);
      await pool.end();
    });

    const rows = async (key: string) =>
      Number(
        (await pool.query(`SELECT count(*) FROM "${payments}" WHERE key = $1`, [key])).rows[0]
          .count,
      );

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
      expect(await app!.get(IdempotencyRecords).delete({ key, route })).toBe(true);
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
}
