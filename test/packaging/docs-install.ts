import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A fresh NestJS 11 app (what `nest new` installs) into which the docs' own install lines are run
 * as written, the packed tarball standing in for `nestjs-idempotency`: the lines are read from the
 * pages, so a page whose line stops installing (a peer that moved, an ERESOLVE) fails here.
 */

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

/** An `npm install` / `npm i` line of a page, and where it is. */
export interface InstallLine {
  page: string;
  line: number;
  command: string;
  /** The page's whole line (with its comment). */
  text: string;
}

/** Every `npm i` / `npm install` with packages in README.md and docs/*.md: sh blocks and `code`. */
export function docsInstallLines(root = ROOT): InstallLine[] {
  const pages = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => `docs/${name}`),
  ];
  return pages.flatMap((page) =>
    readFileSync(join(root, page), 'utf8')
      .split('\n')
      .flatMap((text, index) => {
        const commands = [
          ...text.matchAll(/`(npm (?:i|install) [^`]+)`/g),
          ...text.matchAll(/^(npm (?:i|install) [^#`&|;]+)/g),
        ].map((match) => match[1].trim());
        return commands
          .filter((command) => packagesOf(command).length > 0)
          .map((command) => ({ page, line: index + 1, command, text }));
      }),
  );
}

function packagesOf(command: string): string[] {
  return command
    .split(/\s+/)
    .slice(2)
    .filter((arg) => !arg.startsWith('-'));
}

/**
 * The lines the app runs, in order, each picked from its page by a piece of its line: the Redis
 * store (with ioredis 5, as the pages say for an app with TypeORM), the PostgreSQL store and
 * transactional completion through TypeORM and nestjs-cls, @nestjs/config for forRootAsync,
 * Swagger on NestJS 11, Terminus. The README's own first line runs first, as a reader starts.
 */
export const DOCS_APP_STEPS: { page: string; includes: string }[] = [
  { page: 'README.md', includes: 'npm i nestjs-idempotency ioredis' },
  { page: 'docs/stores.md', includes: 'ioredis@5' },
  { page: 'docs/postgres.md', includes: 'npm install nestjs-idempotency pg' },
  { page: 'docs/postgres.md', includes: '@nestjs-cls/transactional' },
  { page: 'docs/options.md', includes: '@nestjs/config' },
  { page: 'docs/integrations.md', includes: '@nestjs/swagger@11' },
  { page: 'docs/integrations.md', includes: '@nestjs/terminus' },
];

/** The lines the pages give for NestJS 12, run in the NestJS 12 ESM scratch app. */
export const NEST12_DOCS_STEPS: { page: string; includes: string }[] = [
  { page: 'docs/integrations.md', includes: '# NestJS 12' },
  { page: 'docs/integrations.md', includes: '@nestjs/terminus' },
];

/** The steps' lines as the pages write them; a step its page no longer has fails, naming it. */
export function docsAppLines(steps = DOCS_APP_STEPS, root = ROOT): InstallLine[] {
  const lines = docsInstallLines(root);
  return steps.map((step) => {
    const found = lines.find((l) => l.page === step.page && l.text.includes(step.includes));
    if (!found) {
      throw new Error(`${step.page} has no npm install line with "${step.includes}" any more`);
    }
    return found;
  });
}

const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

/**
 * Creates the fresh app (the `nest new` dependency set at the versions the repository runs), then
 * runs each line with the tarball in place of `nestjs-idempotency`. Returns the app's folder.
 */
export async function installDocsApp(
  work: string,
  tarball: string,
  base: Record<string, string>,
): Promise<{ dir: string; lines: InstallLine[] }> {
  const dir = join(work, 'nest11-docs');
  await mkdir(dir);
  const packageJson = { name: 'scratch-nest11-docs', private: true, dependencies: base };
  await writeFile(join(dir, 'package.json'), JSON.stringify(packageJson, null, 2));
  await writeFile(join(dir, 'main.js'), DOCS_APP_MAIN);
  await run('npm', ['install', ...NPM_FLAGS], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
  const lines = docsAppLines();
  await runInstallLines(dir, lines, tarball, 'NestJS 11');
  return { dir, lines };
}

/** Runs each line in the app, the tarball in place of `nestjs-idempotency`. */
export async function runInstallLines(
  dir: string,
  lines: InstallLine[],
  tarball: string,
  nest: string,
): Promise<void> {
  for (const line of lines) {
    const [, verb, ...args] = line.command.split(/\s+/);
    const swapped = args.map((arg) => (arg === 'nestjs-idempotency' ? tarball : arg));
    await run('npm', [verb, ...swapped, ...NPM_FLAGS], {
      cwd: dir,
      maxBuffer: 16 * 1024 * 1024,
    }).catch((error: { stderr?: string }) => {
      throw new Error(
        `${line.page}:${line.line} \`${line.command}\` failed in a fresh ${nest} app:\n` +
          (error.stderr ?? String(error)),
      );
    });
  }
}

/**
 * For the NestJS 12 ESM scratch app, after the Nest 12 lines: the memory store, the OpenAPI
 * document with @ApiIdempotent() and Terminus /health, through the package's ESM subpaths.
 */
export const DOCS_NEST12_MAIN = `import 'reflect-metadata';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { IdempotencyModule, Idempotent } from 'nestjs-idempotency';
import { ApiIdempotent } from 'nestjs-idempotency/swagger';
import { IdempotencyHealthIndicator } from 'nestjs-idempotency/terminus';

const decorate = (target, name, decorators) => Reflect.decorate(decorators, target.prototype,
  name, Object.getOwnPropertyDescriptor(target.prototype, name));
class PaymentsController {
  create(body) { return { amount: body.amount }; }
}
decorate(PaymentsController, 'create', [Post(), Idempotent(), ApiIdempotent(), (t, k) => Body()(t, k, 0)]);
Reflect.decorate([Controller('payments')], PaymentsController);
class HealthController {
  constructor(health, idempotency) { this.health = health; this.idempotency = idempotency; }
  check() { return this.health.check([() => this.idempotency.pingCheck('idempotency')]); }
}
Reflect.defineMetadata('design:paramtypes', [HealthCheckService, IdempotencyHealthIndicator], HealthController);
decorate(HealthController, 'check', [Get(), HealthCheck()]);
Reflect.decorate([Controller('health')], HealthController);
class AppModule {}
Reflect.decorate([Module({
  imports: [TerminusModule, IdempotencyModule.forRoot({})],
  controllers: [PaymentsController, HealthController],
  providers: [IdempotencyHealthIndicator],
})], AppModule);
const app = await NestFactory.create(AppModule, { logger: ['error'], abortOnError: false });
const document = SwaggerModule.createDocument(app, new DocumentBuilder().build());
const parameters = document.paths['/payments'].post.parameters.map((p) => p.name);
await app.listen(0, '127.0.0.1');
console.log('READY ' + JSON.stringify({ port: app.getHttpServer().address().port, resolved: '', parameters }));
`;

/**
 * The app: STORE=postgres runs the PostgreSQL store with transactional completion through the
 * TypeORM adapter (a payment row written in the handler's transaction), STORE=redis the Redis store
 * configured through @nestjs/config's ConfigService; both serve /health through Terminus and build
 * the OpenAPI document with @ApiIdempotent(). Decorators applied as tsc emits them.
 */
const DOCS_APP_MAIN = `require('reflect-metadata');
const { Body, Controller, Get, Module, Post } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { ConfigModule, ConfigService } = require('@nestjs/config');
const { ClsModule } = require('nestjs-cls');
const { ClsPluginTransactional, TransactionHost } = require('@nestjs-cls/transactional');
const { TransactionalAdapterTypeOrm } = require('@nestjs-cls/transactional-adapter-typeorm');
const { DataSource } = require('typeorm');
const { DocumentBuilder, SwaggerModule } = require('@nestjs/swagger');
const { HealthCheck, HealthCheckService, TerminusModule } = require('@nestjs/terminus');
const { IdempotencyModule, Idempotent } = require('nestjs-idempotency');
const { ApiIdempotent } = require('nestjs-idempotency/swagger');
const { IdempotencyHealthIndicator } = require('nestjs-idempotency/terminus');

const decorate = (target, name, decorators) => Reflect.decorate(decorators, target.prototype,
  name, Object.getOwnPropertyDescriptor(target.prototype, name));
const { STORE, DATABASE_URL, TABLE, PAYMENTS } = process.env;

class PaymentsController {
  constructor(txHost) { this.txHost = txHost; }
  async create(body) {
    if (STORE !== 'postgres') return { amount: body.amount };
    const [row] = await this.txHost.tx.query(
      'INSERT INTO "' + PAYMENTS + '" (amount) VALUES ($1) RETURNING id', [body.amount]);
    return { id: row.id, amount: body.amount };
  }
}
Reflect.defineMetadata('design:paramtypes', [TransactionHost], PaymentsController);
decorate(PaymentsController, 'create', [Post(), Idempotent(), ApiIdempotent(), (t, k) => Body()(t, k, 0)]);
Reflect.decorate([Controller('payments')], PaymentsController);

class HealthController {
  constructor(health, idempotency) { this.health = health; this.idempotency = idempotency; }
  check() { return this.health.check([() => this.idempotency.pingCheck('idempotency')]); }
}
Reflect.defineMetadata('design:paramtypes', [HealthCheckService, IdempotencyHealthIndicator], HealthController);
decorate(HealthController, 'check', [Get(), HealthCheck()]);
Reflect.decorate([Controller('health')], HealthController);

class DatabaseModule {}
const dataSource = { provide: DataSource, useFactory: () => new DataSource({ type: 'postgres', url: DATABASE_URL }).initialize() };
Reflect.decorate([Module({ providers: [dataSource], exports: [DataSource] })], DatabaseModule);

const idempotency = STORE === 'postgres'
  ? IdempotencyModule.forRoot({ postgres: { connectionString: DATABASE_URL, table: TABLE, ensureSchema: true }, transactional: true })
  : IdempotencyModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config) => ({ redis: config.getOrThrow('REDIS_URL'), keyPrefix: config.get('KEY_PREFIX') }),
    });
class AppModule {}
Reflect.decorate([Module({
  imports: [
    ConfigModule.forRoot(),
    DatabaseModule,
    ClsModule.forRoot({ plugins: [new ClsPluginTransactional({
      imports: [DatabaseModule], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: DataSource }) })] }),
    TerminusModule,
    idempotency,
  ],
  controllers: [PaymentsController, HealthController],
  providers: [IdempotencyHealthIndicator],
})], AppModule);

(async () => {
  if (STORE === 'postgres') {
    const setup = await new DataSource({ type: 'postgres', url: DATABASE_URL }).initialize();
    await setup.query('CREATE TABLE IF NOT EXISTS "' + PAYMENTS + '" (id serial PRIMARY KEY, amount int NOT NULL)');
    await setup.destroy();
  }
  const app = await NestFactory.create(AppModule, { logger: ['error'], abortOnError: false });
  app.enableShutdownHooks();
  const document = SwaggerModule.createDocument(app, new DocumentBuilder().build());
  const parameters = document.paths['/payments'].post.parameters.map((p) => p.name);
  await app.listen(0, '127.0.0.1');
  console.log('READY ' + JSON.stringify({ port: app.getHttpServer().address().port, resolved: require.resolve('nestjs-idempotency'), parameters }));
})().catch((e) => { console.error(e); process.exit(1); });
`;
