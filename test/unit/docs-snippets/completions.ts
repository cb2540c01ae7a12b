/**
 * What a reader fills in around a docs block, kept here so the block itself stays as written.
 *
 * - IMPLIED_IMPORTS: a name a block uses without importing it gets its import (from the package a
 *   Nest app takes it from). The library's own exports are added to it from lib/ (exported-names.ts).
 * - DECLARATIONS: a name a block uses without declaring it (a DTO, a service, an entity) gets this
 *   declaration, before the block. A declaration may use other names of either table.
 * - PAGES: per page, a prelude put before every block of it, and per block (found by a piece of its
 *   text) how it is completed: `wrap: 'members'` puts the block in a class body (a method with its
 *   decorators), `wrap: 'method'` in an async method (statements using `this` or `await`); `inside`
 *   is added inside the wrapper after the block, `after` after everything.
 *
 * A completion supplies what the block implies, never changes what it does: a block that needs a
 * change of meaning to compile is a docs bug, fixed in the page.
 */

/** Package → the names a block may use without importing them. */
export const IMPLIED_IMPORTS: Record<string, string[]> = {
  '@nestjs/common': [
    'ArgumentsHost',
    'Body',
    'CanActivate',
    'Catch',
    'Controller',
    'Delete',
    'ExceptionFilter',
    'ExecutionContext',
    'ForbiddenException',
    'Get',
    'HttpException',
    'HttpStatus',
    'INestApplication',
    'Inject',
    'Injectable',
    'Module',
    'Param',
    'Patch',
    'Post',
    'Put',
    'Query',
    'UseGuards',
    'UseInterceptors',
  ],
  '@nestjs/core': ['NestFactory'],
  '@nestjs/microservices': [
    'ClientProxy',
    'ClientsModule',
    'Ctx',
    'EventPattern',
    'GrpcMethod',
    'MessagePattern',
    'MicroserviceOptions',
    'MqttRecordBuilder',
    'NatsRecordBuilder',
    'Payload',
    'RmqContext',
    'RmqRecordBuilder',
    'RpcException',
    'TcpOptions',
    'Transport',
  ],
  '@nestjs/config': ['ConfigModule', 'ConfigService'],
  '@nestjs/swagger': ['ApiCreatedResponse', 'ApiProperty', 'DocumentBuilder', 'SwaggerModule'],
  '@nestjs/terminus': ['HealthCheck', 'HealthCheckService', 'TerminusModule'],
  rxjs: ['firstValueFrom', 'lastValueFrom'],
  typeorm: [
    'Column',
    'DataSource',
    'Entity',
    'MigrationInterface',
    'PrimaryGeneratedColumn',
    'QueryRunner',
  ],
  'nestjs-cls': ['ClsModule'],
  ioredis: ['Redis'],
  pg: ['Pool'],
  '@nestjs-cls/transactional': ['ClsPluginTransactional', 'Transactional', 'TransactionHost'],
  '@nestjs-cls/transactional-adapter-typeorm': ['TransactionalAdapterTypeOrm'],
  // The integrations other pages use, for when their packages are installed (a name maps to one
  // package: GraphQL's Query clashes with @nestjs/common's, so a block imports it itself).
  '@nestjs/graphql': ['Args', 'Field', 'InputType', 'Int', 'Mutation', 'ObjectType', 'Resolver'],
  '@nestjs/bullmq': ['BullModule', 'InjectQueue', 'Processor', 'WorkerHost'],
  bullmq: ['Job', 'Queue'],
  '@nestjs/schedule': ['Cron', 'CronExpression', 'ScheduleModule'],
  '@nestjs/axios': ['HttpModule', 'HttpService'],
  'nestjs-idempotency/swagger': ['ApiIdempotent'],
  'nestjs-idempotency/terminus': ['IdempotencyHealthIndicator'],
  'nestjs-idempotency/testing': ['runIdempotencyStoreContract'],
};

const dto = (name: string, fields = 'amount!: number;\n  currency!: string;') =>
  `class ${name} {\n  ${fields}\n}`;

/** Name → its declaration, for the names blocks use as a reader's own code. */
export const DECLARATIONS: Record<string, string> = {
  CreatePaymentDto: dto('CreatePaymentDto'),
  ChargeDto: dto('ChargeDto', 'amount!: number;\n  currency!: string;\n  note?: string;'),
  CardPaymentDto: dto('CardPaymentDto'),
  TransferDto: dto('TransferDto'),
  CreateOrderDto: dto('CreateOrderDto', 'sku!: string;'),
  WebhookEvent: dto('WebhookEvent', 'id!: string;'),
  ChargeCommand: dto('ChargeCommand'),
  OrderPaid: dto('OrderPaid', 'eventId!: string;'),
  OrderShipped: dto('OrderShipped', 'eventId!: string;'),
  Tenant: dto('Tenant', 'id!: string;'),
  Payment: `@Entity()
class Payment {
  @PrimaryGeneratedColumn('uuid') id!: string;
  @Column() amount!: number;
  @Column() currency!: string;
}`,
  PaymentsService: `@Injectable()
class PaymentsService {
  charge(dto: { amount: number }): Promise<{ id: string; amount: number }> {
    return Promise.resolve({ id: 'pay-1', amount: dto.amount });
  }
}`,
  OrdersService: `@Injectable()
class OrdersService {
  markPaid(event: { eventId: string }): Promise<void> {
    return Promise.resolve(void event);
  }
}`,
  ShippingService: `@Injectable()
class ShippingService {
  record(event: { eventId: string }): Promise<void> {
    return Promise.resolve(void event);
  }
}`,
  CardDeclinedError: `class CardDeclinedError extends Error {}`,
  operationIdOf: `declare function operationIdOf(ctx: ExecutionContext): Promise<string | undefined>;`,
  DatabaseModule: `@Module({
  providers: [{ provide: DataSource, useValue: new DataSource({ type: 'postgres' }) }],
  exports: [DataSource],
})
class DatabaseModule {}`,
  MyStore: `class MyStore extends MemoryIdempotencyStore {}`,
  PG_POOL: `const PG_POOL = Symbol('PG_POOL');`,
  PgModule: `@Module({
  providers: [{ provide: PG_POOL, useFactory: () => new Pool() }],
  exports: [PG_POOL],
})
class PgModule {}`,
  MY_REDIS_CLIENT: `const MY_REDIS_CLIENT = Symbol('MY_REDIS_CLIENT');`,
  RedisModule: `@Module({
  providers: [{ provide: MY_REDIS_CLIENT, useFactory: () => new Redis() }],
  exports: [MY_REDIS_CLIENT],
})
class RedisModule {}`,
  CatsService: `@Injectable()
class CatsService {
  create(cat: { name: string }): { name: string } {
    return cat;
  }
}`,
  CatsController: `@Controller('cats')
class CatsController {
  constructor(private readonly catsService: CatsService) {}

  @Post()
  @Idempotent()
  create(@Body() cat: { name: string }): { name: string } {
    return this.catsService.create(cat);
  }
}`,
  CatsModule: `@Module({ controllers: [CatsController], providers: [CatsService] })
class CatsModule {}`,
  app: `declare const app: INestApplication;`,
  client: `declare const client: ClientProxy;`,
  headers: `import { headers } from 'nats';`,
};

/** How a block is completed; `match` is a piece of its text. */
export interface BlockCompletion {
  match: string;
  wrap?: 'members' | 'method';
  /** Before the block (and its wrapper), after the declarations. */
  before?: string;
  /** Inside the wrapper, after the block. */
  inside?: string;
  /** After the block (and its wrapper). */
  after?: string;
}

export interface PageCompletions {
  /** Before every block of the page (after the implied imports and declarations). */
  prelude?: string;
  blocks?: BlockCompletion[];
}

/** The class a wrapped block lives in: the services fragments reach through `this`. */
export const WRAPPER_OPEN = `@Controller()
class DocsBlockHost {
  constructor(
    private readonly payments: PaymentsService,
    private readonly orders: OrdersService,
    private readonly shipping: ShippingService,
    private readonly records: IdempotencyRecords,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}
`;
export const WRAPPER_CLOSE = '}';
/** The same, for a block that has its own constructor. */
export const WRAPPER_OPEN_BARE = `@Controller()\nclass DocsBlockHost {\n`;

/** NestJS 12's NATS transport uses the @nats-io packages. */
export const NEST12_DECLARATIONS: Record<string, string> = {
  headers: `import { headers } from '@nats-io/transport-node';`,
};

/** A handler a decorator-only block decorates. */
const HANDLER = 'create() {}';

export const PAGES: Record<string, PageCompletions> = {
  'README.md': {
    blocks: [
      { match: '@Idempotent({ storeErrors: [402, CardDeclinedError] })', wrap: 'members' },
      { match: 'fingerprint: (ctx) =>', wrap: 'members', inside: HANDLER },
      { match: 'constructor(private readonly records: IdempotencyRecords)', wrap: 'members' },
    ],
  },
  'docs/microservices.md': {
    blocks: [
      { match: "client.send('payments.charge', { amount: 100", wrap: 'method' },
      { match: '@Idempotent({ storeErrors: [RpcException] })', wrap: 'members' },
      {
        match: 'connectMicroservice({ transport: Transport.TCP, options }',
        wrap: 'method',
        before: "declare const options: TcpOptions['options'];",
      },
    ],
  },
  'docs/operators.md': {
    blocks: [
      {
        match: 'await this.records.inspect(query); // absent, pending or completed',
        wrap: 'method',
      },
    ],
  },
  'docs/options.md': {
    blocks: [
      { match: 'fingerprint: (ctx) => {', wrap: 'members' },
      { match: '@Idempotent({ scope: (ctx)', wrap: 'members', inside: HANDLER },
      { match: '@Idempotent({ storeErrors: [402, CardDeclinedError] })', wrap: 'members' },
      { match: '@Idempotent({ transactional: true })', wrap: 'members' },
      { match: "@Idempotent({ keySpace: 'payments' })", wrap: 'members' },
    ],
  },
  'docs/wait-mode.md': {
    blocks: [{ match: "@Idempotent({ onConflict: 'wait'", wrap: 'members' }],
  },
  // The globals of Jest, which `nest new` installs with its tests.
  'docs/testing.md': {
    prelude: `declare function describe(name: string, fn: () => void): void;
declare function it(name: string, fn: () => Promise<void>): void;
declare function beforeAll(fn: () => Promise<void>): void;
declare function afterAll(fn: () => Promise<void>): void;
declare function expect(actual: unknown): {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
};`,
  },
};
