import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dropTable, testPool, testPostgresUrl, uniqueTable } from '../support/postgres';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import {
  DOCS_NEST12_MAIN,
  NEST12_DOCS_STEPS,
  docsAppLines,
  installDocsApp,
  runInstallLines,
  type InstallLine,
} from './docs-install';

/**
 * The package as users get it: `npm pack` of a copy of the sources (so the shared dist/ is never
 * rebuilt under a running suite), then three scratch apps install the tarball next to their own
 * NestJS: a NestJS 11 CommonJS app (require) and a NestJS 12 ESM-only app (import), both hybrid
 * apps with a TCP microservice, and a NestJS 11 HTTP-only app without ioredis and without
 * @nestjs/microservices. Each boots on the memory store (and the first two on Redis), sends one POST
 * twice and, where it has a microservice, one message twice through a ClientProxy. A tarball
 * without lua/, a broken exports map, a second @nestjs/core, an app loading both builds, a lazy
 * require of @nestjs/microservices that gives the library another module instance than the app's
 * (its RpcException would not be recognised), or an optional peer loaded eagerly fails here.
 */

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
/** What `npm pack` needs to build and pack; node_modules is linked, not copied. */
const PACKAGE_SOURCES = [
  'package.json',
  'lib',
  'lua',
  'sql',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.build-esm.json',
  'compat/finish-esm-build.mjs',
  'README.md',
  'CHANGELOG.md',
  'LICENSE',
];
const NPM_INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

interface ScratchApp {
  name: string;
  nest: string;
  type: 'commonjs' | 'module';
  /** Versions of the optional peers installed next to it; absent: not installed. */
  ioredis?: string;
  microservices?: string;
  /** Loads the packages the app body uses and sets RESOLVED to the file `nestjs-idempotency` maps to. */
  header: string;
  /** The docs' install lines for this app's NestJS, run after its own install (docs.mjs uses them). */
  docsLines?: InstallLine[];
  dir?: string;
}

// The same app in both module systems: decorators applied with Reflect.decorate, as tsc emits them.
const HTTP_PART = `
const decorate = (target, name, decorators) => Reflect.decorate(decorators, target.prototype,
  name, Object.getOwnPropertyDescriptor(target.prototype, name));
let runs = 0;
class PaymentsController {
  create(body) {
    runs += 1;
    return { id: 'pay-' + runs, amount: body.amount };
  }
  runs() {
    return { runs };
  }
}
decorate(PaymentsController, 'create', [Post('payments'), Idempotent(), (target, key) => Body()(target, key, 0)]);
decorate(PaymentsController, 'runs', [Get('runs')]);
Reflect.decorate([Controller()], PaymentsController);
const controllers = [PaymentsController];
`;

/**
 * A \`@MessagePattern('charge') @Idempotent()\` handler on a TCP microservice of the same (hybrid)
 * app, and a ClientProxy that sends it the same message twice, then the same key with another
 * payload. The outcomes go into the READY line for the test to check.
 */
const RPC_CONTROLLER = `
let charges = 0;
class ChargesController {
  charge(data) {
    charges += 1;
    return { id: 'charge-' + charges, amount: data.amount };
  }
}
decorate(ChargesController, 'charge', [MessagePattern('charge'), Idempotent(), (target, key) => Payload()(target, key, 0)]);
Reflect.decorate([Controller()], ChargesController);
controllers.push(ChargesController);
`;
const RPC_EXCHANGE = `
// In the order Nest documents for hybrid apps (connectMicroservice, startAllMicroservices, listen)
// unless INIT_FIRST: then app.init() (and so onApplicationBootstrap) runs before the first message.
if (process.env.INIT_FIRST) await app.init();
const microservice = app.connectMicroservice(
  { transport: Transport.TCP, options: { host: '127.0.0.1', port: 0 } },
  { inheritAppConfig: true },
);
await app.startAllMicroservices();
const client = ClientProxyFactory.create({
  transport: Transport.TCP,
  options: { host: '127.0.0.1', port: microservice.unwrap().address().port },
});
// Errors as plain data: an RpcException's error object as it is, a client-side Error by name.
const send = (data) => firstValueFrom(client.send('charge', data).pipe(timeout(5000))).then(
  (reply) => ({ reply }),
  (error) => ({ error: error instanceof Error ? { name: error.name, message: error.message } : error }),
);
const first = await send({ idempotencyKey: 'k1', amount: 5 });
const second = await send({ idempotencyKey: 'k1', amount: 5 });
const reused = await send({ idempotencyKey: 'k1', amount: 6 });
await client.close();
const rpc = { first, second, reused, runs: charges };
`;

function appBody(app: ScratchApp): string {
  const rpc = app.microservices !== undefined;
  return `${HTTP_PART}${rpc ? RPC_CONTROLLER : ''}
class AppModule {}
const store = process.env.REDIS_URL
  ? { redis: process.env.REDIS_URL, keyPrefix: process.env.KEY_PREFIX }
  : {};
Reflect.decorate([Module({ imports: [IdempotencyModule.forRoot(store)], controllers })], AppModule);
// abortOnError: false, so a failed bootstrap rejects (and is printed) instead of process.abort().
const app = await NestFactory.create(AppModule, { logger: ['error'], abortOnError: false });
${rpc ? RPC_EXCHANGE : 'const rpc = undefined;'}
await app.listen(0, '127.0.0.1');
console.log('READY ' + JSON.stringify({ port: app.getHttpServer().address().port, resolved: RESOLVED, rpc }));
`;
}

const NEST11 = installedVersion(join(ROOT, 'node_modules', '@nestjs', 'core', 'package.json'));
const NEST11_HEADER = `require('reflect-metadata');
const { Body, Controller, Get, Module, Post } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Idempotent, IdempotencyModule } = require('nestjs-idempotency');
const RESOLVED = require.resolve('nestjs-idempotency');`;

const APPS: ScratchApp[] = [
  {
    name: 'nest11-cjs',
    nest: NEST11,
    type: 'commonjs',
    ioredis: rootVersion('ioredis'),
    microservices: rootVersion('@nestjs/microservices'),
    header: `${NEST11_HEADER}
const { ClientProxyFactory, MessagePattern, Payload, Transport } = require('@nestjs/microservices');
const { firstValueFrom, timeout } = require('rxjs');`,
  },
  {
    name: 'nest12-esm',
    nest: lockedNest12Version('@nestjs/core'),
    docsLines: docsAppLines(NEST12_DOCS_STEPS),
    type: 'module',
    ioredis: rootVersion('ioredis'),
    microservices: lockedNest12Version('@nestjs/microservices'),
    header: `import 'reflect-metadata';
import { fileURLToPath } from 'node:url';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientProxyFactory, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { firstValueFrom, timeout } from 'rxjs';
import { Idempotent, IdempotencyModule } from 'nestjs-idempotency';
const RESOLVED = fileURLToPath(import.meta.resolve('nestjs-idempotency'));`,
  },
  {
    // Neither optional peer: nothing may load them unless a feature that needs them is used.
    name: 'nest11-http-only',
    nest: NEST11,
    type: 'commonjs',
    header: NEST11_HEADER,
  },
];

function installedVersion(packageJson: string): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require(packageJson) as { version: string }).version;
}

function rootVersion(name: string): string {
  return installedVersion(join(ROOT, 'node_modules', name, 'package.json'));
}

/** The version of `name` in the NestJS 12 set the suite runs against (compat/nest12). */
function lockedNest12Version(name: string): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const lock = require(join(ROOT, 'compat', 'nest12', 'package-lock.json')) as {
    packages: Record<string, { version: string }>;
  };
  return lock.packages[`node_modules/${name}`].version;
}

/** The app body wrapped for its module system: CommonJS has no top-level await. */
function mainFile(app: ScratchApp): string {
  return app.type === 'module'
    ? `${app.header}\n${appBody(app)}`
    : `${app.header}\n(async () => {${appBody(app)}})().catch((e) => { console.error(e); process.exit(1); });\n`;
}

async function packTarball(work: string): Promise<string> {
  const source = join(work, 'source');
  for (const path of PACKAGE_SOURCES)
    await cp(join(ROOT, path), join(source, path), { recursive: true });
  await symlink(join(ROOT, 'node_modules'), join(source, 'node_modules'), 'dir');
  // prepack builds dist/ (both builds) inside the copy.
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], {
    cwd: source,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  return join(work, packed.filename);
}

async function installApp(work: string, app: ScratchApp, tarball: string): Promise<string> {
  const dir = join(work, app.name);
  await mkdir(dir);
  const packageJson = {
    name: `scratch-${app.name}`,
    private: true,
    type: app.type,
    dependencies: {
      '@nestjs/common': app.nest,
      '@nestjs/core': app.nest,
      '@nestjs/platform-express': app.nest,
      ...(app.microservices && { '@nestjs/microservices': app.microservices }),
      ...(app.ioredis && { ioredis: app.ioredis }),
      'nestjs-idempotency': `file:${tarball}`,
      'reflect-metadata': rootVersion('reflect-metadata'),
      rxjs: rootVersion('rxjs'),
    },
  };
  await writeFile(join(dir, 'package.json'), JSON.stringify(packageJson, null, 2));
  await writeFile(join(dir, 'main.js'), mainFile(app));
  await run('npm', NPM_INSTALL, { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
  if (app.docsLines) {
    await writeFile(join(dir, 'docs.mjs'), DOCS_NEST12_MAIN);
    await runInstallLines(dir, app.docsLines, tarball, `NestJS ${app.nest}`);
  }
  return dir;
}

/** What the scratch app prints once it listens: `READY {json}`. */
interface Ready {
  port: number;
  /** The file `nestjs-idempotency` resolves to in the app. */
  resolved: string;
  /** The ClientProxy exchange, in apps with a microservice. */
  rpc?: { first: unknown; second: unknown; reused: unknown; runs: number };
}

interface Booted extends Ready {
  url: string;
  child: ChildProcess;
}

/** Runs `node main.js`; `settle` is called with each output chunk (stdout and stderr) and on exit. */
function start(
  dir: string,
  env: Record<string, string>,
  settle: (output: string, exit?: { code: number | null; signal: string | null }) => boolean,
): ChildProcess {
  // The scratch apps pick their store from REDIS_URL and KEY_PREFIX: a developer's own (the
  // suite's Redis, say) must not turn a memory-store boot into a Redis one.
  const inherited = { ...process.env };
  delete inherited.REDIS_URL;
  delete inherited.KEY_PREFIX;
  const child = spawn(process.execPath, [env.SCRIPT ?? 'main.js'], {
    cwd: dir,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let settled = false;
  const timer = setTimeout(() => {
    settled = true;
    child.kill('SIGKILL');
    settle(`${output}\n[no READY line and no exit within 20 s]`, { code: null, signal: 'SIGKILL' });
  }, 20_000);
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    if (!settled && settle(output)) {
      settled = true;
      clearTimeout(timer);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  // 'close', not 'exit': it comes after the last output, which a failed boot's check reads.
  child.on('close', (code, signal) => {
    clearTimeout(timer);
    if (!settled) settle(output, { code, signal });
    settled = true;
  });
  return child;
}

/** Starts `node main.js` and waits for its READY line. */
function boot(dir: string, env: Record<string, string>): Promise<Booted> {
  return new Promise((resolve, reject) => {
    const child = start(dir, env, (output, exit) => {
      // A whole line only: output arrives in chunks.
      const ready = /^READY (.*)\n/m.exec(output);
      if (ready) {
        const parsed = JSON.parse(ready[1]) as Ready;
        resolve({ ...parsed, url: `http://127.0.0.1:${parsed.port}`, child });
        return true;
      }
      if (exit) {
        const how = exit.signal ?? `code ${exit.code}`;
        reject(new Error(`${dir}/main.js exited (${how}) before READY:\n${output}`));
      }
      return false;
    });
  });
}

/** Runs `node main.js` to its exit, for an app that must fail to boot. */
function bootFailure(
  dir: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    start(dir, env, (output, exit) => {
      if (exit) resolve({ code: exit.code, output });
      return exit !== undefined;
    });
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

async function pay(url: string, key: string) {
  const response = await fetch(`${url}/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount: 100 }),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: await response.text(),
  };
}

/** Fails with a message naming the service when the suite's Redis does not answer. */
async function redisAnswers(): Promise<string> {
  const url = testRedisUrl();
  const client = inspectionClient();
  try {
    await client.ping();
  } catch (error) {
    throw new Error(`Redis at ${url} does not answer (${(error as Error).message})`);
  } finally {
    client.disconnect();
  }
  return url;
}

/**
 * What the scratch app's ClientProxy saw: the handler ran once, the duplicate got the same reply,
 * and the same key with another payload got the library's RpcException. The app's Nest sends that
 * error object only if it is an instance of the RpcException class the app itself imported, i.e.
 * only if the library's lazy require of @nestjs/microservices gave it the app's module instance
 * (else the client gets 'Internal server error' and no code).
 */
const RPC_EXPECTED = {
  first: { reply: { id: 'charge-1', amount: 5 } },
  second: { reply: { id: 'charge-1', amount: 5 } },
  reused: { error: expect.objectContaining({ status: 'error', code: 'IDEMPOTENCY_KEY_REUSED' }) },
  runs: 1,
};

describe('the packed package in scratch apps', () => {
  let work: string;
  let source: string;
  let files: string[];
  const redisPrefix = uniquePrefix('packaging');
  const children: ChildProcess[] = [];
  /** The docs' install lines in a fresh app; awaited by its own tests, so a failure is theirs. */
  let docsApp: Promise<{ dir: string; lines: InstallLine[] }>;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'nestjs-idempotency-packaging-'));
    source = join(work, 'source');
    const tarball = await packTarball(work);
    const { stdout } = await run('tar', ['-tzf', tarball]);
    files = stdout.split('\n').filter(Boolean);
    docsApp = installDocsApp(work, tarball, {
      '@nestjs/common': NEST11,
      '@nestjs/core': NEST11,
      '@nestjs/platform-express': NEST11,
      'reflect-metadata': rootVersion('reflect-metadata'),
      rxjs: rootVersion('rxjs'),
    });
    docsApp.catch(() => {}); // reported by the tests that await it
    await Promise.all(APPS.map(async (app) => (app.dir = await installApp(work, app, tarball))));
    // npm pack, then four installs at once, the docs' lines one after another in two of them.
  }, 600_000);

  /** REDIS_URL and a key prefix of the boot's own (the message key is 'k1' in every app). */
  async function redisEnv(app: ScratchApp, boot = 'http'): Promise<Record<string, string>> {
    return { REDIS_URL: await redisAnswers(), KEY_PREFIX: `${redisPrefix}${app.name}:${boot}:` };
  }

  afterAll(async () => {
    await Promise.all(children.map(stop));
    await docsApp?.catch(() => undefined); // its npm must end before the folder goes
    const client = inspectionClient();
    await deleteKeysUnder(client, redisPrefix);
    client.disconnect();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('ships lua/, sql/, both builds and every file the exports map names', async () => {
    const manifest = JSON.parse(await readFile(join(source, 'package.json'), 'utf8')) as {
      exports: Record<string, string | Record<string, Record<string, string>>>;
    };
    const missing = Object.entries(manifest.exports).flatMap(([subpath, entry]) => {
      // A subpath whose sources do not exist yet (lib/swagger, lib/terminus while they are being
      // written) may point nowhere; as soon as lib/<name>/index.ts exists, its files must ship.
      // Checked in the copy that was packed: the working tree may have gained files since.
      if (subpath !== '.' && !existsSync(join(source, 'lib', subpath, 'index.ts'))) return [];
      const targets =
        typeof entry === 'string' ? [entry] : Object.values(entry).flatMap(Object.values);
      return targets.filter((target) => !files.includes(`package/${target.slice(2)}`));
    });
    expect(missing).toEqual([]);
    expect(files).toEqual(
      expect.arrayContaining([
        'package/lua/claim-2.lua',
        'package/sql/postgres/001_idempotency_records.sql',
        'package/sql/mysql/001_idempotency_records.sql',
        'package/dist/esm/package.json',
      ]),
    );
    expect(files.filter((file) => /\/(test|sample-app|compat|bench)\//.test(file))).toEqual([]);
  });

  describe.each(APPS)('$name', (app) => {
    it("installs one @nestjs/core, the app's own, and the optional peers it asked for", async () => {
      const { stdout } = await run('npm', ['ls', '@nestjs/core', '--all', '--parseable'], {
        cwd: app.dir,
      });
      const copies = [...new Set(stdout.split('\n').filter(Boolean))];
      expect(copies).toEqual([join(app.dir!, 'node_modules', '@nestjs', 'core')]);
      const installed = (name: string) => existsSync(join(app.dir!, 'node_modules', name));
      expect({
        ioredis: installed('ioredis'),
        microservices: installed('@nestjs/microservices'),
      }).toEqual({
        ioredis: app.ioredis !== undefined,
        microservices: app.microservices !== undefined,
      });
    });

    it('type-checks against the types of the build it loads', async () => {
      // nodenext, what the NestJS 11 CLI generates, for both apps (CommonJS by the app's
      // package.json, or ESM); the CommonJS app also with the old node10 resolution of older
      // projects, which finds the subpaths through typesVersions. The repository's TypeScript.
      const nodenext = ['--module', 'nodenext', '--moduleResolution', 'nodenext'];
      const node10 = ['--module', 'commonjs', '--moduleResolution', 'node10'];
      const settings = app.type === 'module' ? [nodenext] : [nodenext, node10];
      await writeFile(
        join(app.dir!, 'consumer.ts'),
        `import { IdempotencyModule, Idempotent, MemoryIdempotencyStore } from 'nestjs-idempotency';
import { runIdempotencyStoreContract } from 'nestjs-idempotency/testing';
export const used = [IdempotencyModule.forRoot({ store: new MemoryIdempotencyStore() }), Idempotent(), runIdempotencyStoreContract];
`,
      );
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      for (const options of settings) {
        const args = [tsc, '--noEmit', '--strict', '--skipLibCheck', '--types', 'node', ...options];
        await run(
          process.execPath,
          [...args, '--typeRoots', join(ROOT, 'node_modules', '@types'), 'consumer.ts'],
          { cwd: app.dir },
        ).catch((error: { stdout?: string }) => {
          throw new Error(
            `tsc (${options.join(' ')}) in ${app.name}:\n${error.stdout ?? String(error)}`,
          );
        });
      }
    }, 120_000); // tsc twice for a CommonJS app

    it.each(app.ioredis ? ['memory', 'redis'] : ['memory'])(
      'replays the second POST on the %s store',
      async (store) => {
        const env = store === 'redis' ? await redisEnv(app) : {};
        const booted = await boot(app.dir!, env);
        children.push(booted.child);
        // Only one of the two builds is loaded: the one for the app's module system.
        const build = app.type === 'module' ? 'dist/esm/index.js' : 'dist/index.js';
        expect(booted.resolved).toBe(join(app.dir!, 'node_modules', 'nestjs-idempotency', build));

        const key = `${app.name}-${store}-${Date.now()}`;
        const first = await pay(booted.url, key);
        const second = await pay(booted.url, key);
        const runs = await (await fetch(`${booted.url}/runs`)).json();

        expect(first).toEqual({ status: 201, replayed: null, body: first.body });
        expect(JSON.parse(first.body)).toEqual({ id: 'pay-1', amount: 100 });
        expect(second).toEqual({ status: 201, replayed: 'true', body: first.body });
        expect(runs).toEqual({ runs: 1 });
        // The TCP exchange ran during boot; on the memory store it is checked here.
        if (store === 'memory') expect(booted.rpc).toEqual(app.microservices && RPC_EXPECTED);
        await stop(booted.child);
      },
    );

    if (app.microservices && app.ioredis) {
      it('replays the second TCP message on the redis store, app.init() before the microservice', async () => {
        const booted = await boot(app.dir!, {
          ...(await redisEnv(app, 'init-first')),
          INIT_FIRST: '1',
        });
        children.push(booted.child);
        expect(booted.rpc).toEqual(RPC_EXPECTED);
        await stop(booted.child);
      });

      // Started in the order Nest documents, the microservice consumes before app.init(), so before
      // IdempotencyModule.onApplicationBootstrap has waited for Redis: the client the module
      // created must queue its first commands until its first connection is ready.
      it('replays the second TCP message on the redis store, started as Nest documents hybrid apps', async () => {
        const booted = await boot(app.dir!, await redisEnv(app, 'documented'));
        children.push(booted.child);
        expect(booted.rpc).toEqual(RPC_EXPECTED);
        await stop(booted.child);
      });
    }

    if (!app.ioredis) {
      it('runs on the memory store without lua/, as a bundle that left it out would', async () => {
        const lua = join(app.dir!, 'node_modules', 'nestjs-idempotency', 'lua');
        await rename(lua, `${lua}.moved`);
        try {
          const booted = await boot(app.dir!, {});
          children.push(booted.child);
          const key = `${app.name}-no-lua-${Date.now()}`;
          expect((await pay(booted.url, key)).replayed).toBeNull();
          expect((await pay(booted.url, key)).replayed).toBe('true');
          await stop(booted.child);
        } finally {
          await rename(`${lua}.moved`, lua);
        }
      });

      it('fails at bootstrap with `npm install ioredis` when configured with redis', async () => {
        // Nothing listens there, and nothing tries: the missing package is found first.
        const { code, output } = await bootFailure(app.dir!, {
          REDIS_URL: 'redis://127.0.0.1:1',
        });
        expect(output).not.toMatch(/^READY /m);
        expect(code).toBe(1);
        expect(output).toContain(
          'IdempotencyModule: the `redis` option needs the ioredis package. Install it: npm install ioredis',
        );
      });
    }
  });

  it("nest12-esm: the docs' NestJS 12 lines (Swagger, Terminus) install; the document and /health work", async () => {
    const app = APPS.find((candidate) => candidate.docsLines)!;
    const booted = await boot(app.dir!, { SCRIPT: 'docs.mjs' });
    children.push(booted.child);
    expect((booted as Booted & { parameters: string[] }).parameters).toContain('Idempotency-Key');
    const health = await fetch(`${booted.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ info: { idempotency: { status: 'up' } } });
    const key = `docs-nest12-${Date.now()}`;
    expect((await pay(booted.url, key)).replayed).toBeNull();
    expect((await pay(booted.url, key)).replayed).toBe('true');
    await stop(booted.child);
  });

  describe('nest11-docs: the install lines of the README and docs/, as written, in a fresh app', () => {
    it('installs each line (Redis beside TypeORM, PostgreSQL + TypeORM + nestjs-cls, @nestjs/config, Swagger, Terminus)', async () => {
      const { dir, lines } = await docsApp;
      expect(lines.map((line) => line.page)).toEqual(
        expect.arrayContaining(['docs/postgres.md', 'docs/integrations.md']),
      );
      // No missing or invalid peer left behind (npm ls exits non-zero on one).
      await run('npm', ['ls', '--depth=0'], { cwd: dir }).catch((error: { stdout?: string }) => {
        throw new Error(`npm ls in the docs app:\n${error.stdout ?? String(error)}`);
      });
    }, 300_000);

    it('boots on PostgreSQL with transactional completion through TypeORM, health and OpenAPI', async () => {
      const { dir } = await docsApp;
      const pool = await testPool();
      const table = uniqueTable('docs_app');
      const payments = uniqueTable('docs_payments');
      try {
        const booted = await boot(dir, {
          STORE: 'postgres',
          DATABASE_URL: testPostgresUrl(),
          TABLE: table,
          PAYMENTS: payments,
        });
        children.push(booted.child);
        const key = `docs-pg-${Date.now()}`;
        const first = await pay(booted.url, key);
        const second = await pay(booted.url, key);
        expect(first.status).toBe(201);
        expect(second).toEqual({ status: 201, replayed: 'true', body: first.body });
        const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${payments}"`);
        expect(rows[0].n).toBe(1);
        const health = await fetch(`${booted.url}/health`);
        expect(health.status).toBe(200);
        expect(await health.json()).toMatchObject({ info: { idempotency: { status: 'up' } } });
        expect((booted as Booted & { parameters: string[] }).parameters).toContain(
          'Idempotency-Key',
        );
        await stop(booted.child);
      } finally {
        await dropTable(pool, table);
        await dropTable(pool, payments);
        await pool.end();
      }
    }, 300_000);

    it('boots on Redis configured through ConfigService (forRootAsync) and replays', async () => {
      const { dir } = await docsApp;
      const booted = await boot(dir, {
        STORE: 'redis',
        DATABASE_URL: testPostgresUrl(),
        REDIS_URL: await redisAnswers(),
        KEY_PREFIX: `${redisPrefix}docs:`,
      });
      children.push(booted.child);
      const key = `docs-redis-${Date.now()}`;
      const first = await pay(booted.url, key);
      expect(first.status).toBe(201);
      expect(await pay(booted.url, key)).toEqual({
        status: 201,
        replayed: 'true',
        body: first.body,
      });
      await stop(booted.child);
    }, 300_000);
  });
});
