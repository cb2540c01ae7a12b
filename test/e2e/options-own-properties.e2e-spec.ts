import {
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  type INestApplication,
  Injectable,
  Module,
  Post,
  UseGuards,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Test } from '@nestjs/testing';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyStore,
  IdempotentMethod,
  MysqlIdempotencyStore,
  PostgresIdempotencyStore,
  type RedisIdempotencyStore,
} from '../../lib';
import { listen } from '../support/http-app';
import { testRedisUrl } from '../support/redis';
import { testMysqlPool, testMysqlUrl } from '../support/mysql';
import { testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { PLATFORMS, post } from '../support/test-app';

/**
 * Options are read as their own properties only. A vulnerable deep merge elsewhere in the app
 * (`merge({}, JSON.parse('{"__proto__": {"scope": "public"}}'))`) leaves names on
 * `Object.prototype`, where every object answers to them: read through the prototype, `scope:
 * 'public'` gave one user another's stored response, and `keySpace` made two routes share their
 * records. Here the prototype is polluted before the app's classes are declared and the module
 * boots, as it would be by a request handled earlier, and restored after each test.
 */
/** What the reported apps had on Object.prototype. */
const SCOPES = { scope: 'public', keySpace: 'shared', enabled: false };
/** Read, it would put the module on a Redis that does not answer (every request a 503). */
const STORE = { redis: 'redis://127.0.0.1:1' };

let polluted: string[] = [];

function pollute(names: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(names)) {
    Object.defineProperty(Object.prototype, name, {
      value,
      enumerable: true,
      configurable: true,
      writable: true,
    });
    polluted.push(name);
  }
}

function restore(): void {
  for (const name of polluted) delete (Object.prototype as Record<string, unknown>)[name];
  polluted = [];
}

type UserRequest = IncomingMessage & { user?: { id: string } };

@Injectable()
class UserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<UserRequest>();
    const id = request.headers['x-user'];
    if (typeof id === 'string') request.user = { id };
    return true;
  }
}

/** The app's classes, declared (and their decorators evaluated) once the prototype is polluted. */
function declareApp() {
  let runs = 0;

  @Controller()
  @UseGuards(UserGuard)
  class PaymentsController {
    @Post('orders')
    @Idempotent()
    order(@Body() body: { amount: number }) {
      return { route: 'orders', run: ++runs, amount: body.amount };
    }

    @Post('refunds')
    @Idempotent()
    refund(@Body() body: { amount: number }) {
      return { route: 'refunds', run: ++runs, amount: body.amount };
    }
  }

  @Injectable()
  class Ledger {
    @IdempotentMethod({ key: (id: string) => id })
    async credit(id: string): Promise<string> {
      return `credited ${id}`;
    }

    @IdempotentMethod({ key: (id: string) => id })
    async debit(id: string): Promise<string> {
      return `debited ${id}`;
    }
  }

  @Module({
    imports: [IdempotencyModule.forRootAsync({ useFactory: () => ({}) })],
    controllers: [PaymentsController],
    providers: [Ledger],
  })
  class AppModule {}

  return { AppModule, Ledger };
}

describe.each(PLATFORMS)('options with Object.prototype polluted, on %s', (platform) => {
  let app: INestApplication | undefined;
  let url: string;
  let ledger: { credit(id: string): Promise<string>; debit(id: string): Promise<string> };

  /** Pollutes the prototype, then declares and boots the app. */
  async function start(names: Record<string, unknown>): Promise<void> {
    pollute(names);
    const { AppModule, Ledger } = declareApp();
    ({ app, url } = await listen(platform, AppModule));
    ledger = app.get(Ledger);
  }

  afterEach(async () => {
    restore();
    await app?.close();
    app = undefined;
  });

  const send = (path: string, user: string, key: string) =>
    post(url, path, { key, body: { amount: 10 }, headers: { 'x-user': user } });

  it("never replays one user's stored response to another (scope from the prototype)", async () => {
    await start(SCOPES);
    const key = randomUUID();
    const first = await send('/orders', 'alice', key);
    expect(first.status).toBe(201);
    const other = await send('/orders', 'bob', key);
    expect(other.status).toBe(201);
    expect(other.headers.get('idempotent-replayed')).toBeNull();
    expect((other.json() as { run: number }).run).not.toBe((first.json() as { run: number }).run);
    // Alice's own retry is still a replay: the route is idempotent, not disabled.
    const retry = await send('/orders', 'alice', key);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.json()).toEqual(first.json());
  });

  it("keeps two routes' records apart (keySpace from the prototype)", async () => {
    await start(SCOPES);
    const key = randomUUID();
    const order = await send('/orders', 'alice', key);
    const refund = await send('/refunds', 'alice', key);
    expect(refund.status).toBe(201);
    expect(refund.headers.get('idempotent-replayed')).toBeNull();
    expect(refund.json()).toMatchObject({ route: 'refunds' });
    expect(order.json()).toMatchObject({ route: 'orders' });
  });

  it("keeps two @IdempotentMethod()s' records apart (scope from the prototype)", async () => {
    await start(SCOPES);
    const id = randomUUID();
    await expect(ledger.credit(id)).resolves.toBe(`credited ${id}`);
    await expect(ledger.debit(id)).resolves.toBe(`debited ${id}`);
  });

  it('boots on the store its options name, not on a `redis` from the prototype', async () => {
    await start(STORE);
    const key = randomUUID();
    const first = await send('/orders', 'alice', key);
    expect(first.status).toBe(201);
    const retry = await send('/orders', 'alice', key);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });
});

/** A SQL store as the suites reach it: its module option's URL, and a pool of the test database. */
const SQL_STORES = [
  {
    name: 'postgres',
    option: () => ({ postgres: testPostgresUrl() }),
    onPool: async () => {
      const pool = await testPool();
      const alive = () => pool.query('SELECT 1').finally(() => pool.end());
      return { store: new PostgresIdempotencyStore(pool), alive };
    },
  },
  {
    name: 'mysql',
    option: () => ({ mysql: testMysqlUrl() }),
    onPool: async () => {
      const pool = await testMysqlPool();
      const alive = () => pool.query('SELECT 1').finally(() => pool.end());
      return { store: new MysqlIdempotencyStore(pool), alive };
    },
  },
];

describe.each(SQL_STORES)('$name store options with Object.prototype polluted', (sql) => {
  afterEach(restore);

  it('keeps the default table, not a `table` from the prototype', async () => {
    pollute({ table: uniqueTable('polluted') });
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot(sql.option())],
    }).compile();
    try {
      expect((moduleRef.get(IdempotencyStore) as { table?: string }).table).toBe(
        'idempotency_records',
      );
    } finally {
      await moduleRef.close();
    }
  });

  it('never ends the pool it was given (`ownsPool` from the prototype)', async () => {
    pollute({ ownsPool: true });
    const { store, alive } = await sql.onPool();
    await store.close();
    restore();
    await expect(alive()).resolves.toBeDefined();
  });
});

describe('redis store options with Object.prototype polluted', () => {
  afterEach(restore);

  it('connects to the node its ioredis options name, not to `clusterNodes` from the prototype', async () => {
    pollute({ clusterNodes: [{ host: '127.0.0.1', port: 1 }] });
    const { hostname, port } = new URL(testRedisUrl());
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ redis: { host: hostname, port: Number(port) } })],
    }).compile();
    try {
      const store = moduleRef.get(IdempotencyStore) as unknown as RedisIdempotencyStore;
      expect(store.client.isCluster).toBe(false);
    } finally {
      await moduleRef.close();
    }
  });
});
